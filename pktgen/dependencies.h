// How a schedule's transfers wait for one another: derived from the byte
// ranges each reads and writes, and, for an all-to-all with a window, from
// the window. Internal to make_schedule.
#pragma once

#include "droce/pktgen/schedule.h"

namespace droce::pktgen {

// Fills s.depends_on (sorted, unique, without itself) from s.transfers in
// generation order, and adds the window of s.params (all_to_all).
void derive_dependencies(Schedule& s);

}  // namespace droce::pktgen
