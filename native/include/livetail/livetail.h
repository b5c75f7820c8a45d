// livetail's whole C++ API in one include: pool, tables, geometry, managers, coordinator,
// prefix caching, step plans, the host tier and a router index's loops (native/README.md).
#pragma once

#include "livetail/coordinator.h"
#include "livetail/geometry.h"
#include "livetail/host.h"
#include "livetail/managers.h"
#include "livetail/plan.h"
#include "livetail/pool.h"
#include "livetail/prefix.h"
#include "livetail/router.h"
#include "livetail/table.h"
