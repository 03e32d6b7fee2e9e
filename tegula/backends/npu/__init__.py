"""The Ascend NPU target: machine models, NPU passes, the emulator and the PTO emitter.

``machine.py`` holds the chips; ``interp_rules.py`` what NPU kernels mean on ``target="cpu"``;
``pipeline.py`` the pass list; ``emu/`` the pipe-level emulator (``ascend-emu:a2a3|a5``);
``pto.py`` the PTO C++ emitter (``ascend-pto:a2a3|a5``).
"""
