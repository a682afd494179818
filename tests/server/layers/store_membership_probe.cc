// Must NOT link: a program of the store layer that calls into the
// membership. zshard_store links zshard_state (the StateStore interface and
// its types) but not zshard_membership, so the two cannot grow a cycle
// again (server_layers_test checks that this fails to link).
#include "server/membership/members/token.h"
#include "server/store/memory_state_store.h"

int main() {
  zshard::server::MemoryStateStore store;
  return zshard::server::NewToken().empty() ? 1 : 0;
}
