// Must NOT compile: a file of the training layer that includes a wire type.
// zshard_worker_train does not link zshard_proto, so the generated header is
// not on its include path (worker_layers_test checks that this fails).
#include "client/worker/train/train_runner.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::testing {

int ProbeWireTypeBelowSession() { return sizeof(zshard::v1::DeviceInfo) > 0; }

}  // namespace zshard::testing
