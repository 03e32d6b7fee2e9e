import numpy as np
import pytest


@pytest.fixture
def rng():
    """A fresh generator per test, seeded differently each run (inputs are never fixed)."""
    return np.random.default_rng()
