// Everything tegula's device code may use. Generated kernels include only the headers they need
// (common.h is always pulled in); this umbrella is for hand-written code and tests.
#pragma once
#include "common.h"
#include "copy.h"
#include "ldmatrix.h"
#include "mma.h"
#include "reduce.h"
#include "print.h"
#include "barrier.h"  // named barriers everywhere; mbarrier / cluster parts on sm_90+
#include "tma.h"      // sm_90+
#include "wgmma.h"    // sm_90a
