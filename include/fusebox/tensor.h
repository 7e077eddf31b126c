// Public lazy tensor API: Tensor, Device, flush/sync, and the lazy layer's observer, counters,
// plan-cache controls and memory checks (docs/lazy.md).
#pragma once

#include "fusebox/session.h"
#include "lazy/fuser.h"
#include "lazy/observer.h"
#include "lazy/segment.h"
#include "lazy/tensor.h"
