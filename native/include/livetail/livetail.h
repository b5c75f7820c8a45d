// livetail's whole C++ API in one include: pool, tables, geometry, managers, coordinator,
// prefix caching, step plans and the host tier (native/README.md).
#pragma once

#include "livetail/coordinator.h"
#include "livetail/geometry.h"
#include "livetail/host.h"
#include "livetail/managers.h"
#include "livetail/plan.h"
#include "livetail/pool.h"
#include "livetail/prefix.h"
#include "livetail/table.h"
