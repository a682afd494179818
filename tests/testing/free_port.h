// A TCP port on 127.0.0.1 that was free a moment ago, for servers a test
// must restart on the same address.
#pragma once

namespace zshard::testing {

// Binds port 0, reads the port the kernel chose and releases it. Returns 0
// on failure. Another process may take it in between; tests that cannot
// use port 0 accept that small race.
int PickFreePort();

}  // namespace zshard::testing
