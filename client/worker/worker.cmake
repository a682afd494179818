# The worker daemon's libraries (runner/, train/, session/) and the
# zshard-worker executable (with the re-sharding executor and the
# checkpoint files it drives).
zshard_pkg_check(ZSHARD_WORKER_HTTPLIB cpp-httplib libcpp-httplib-dev)
# The daemon in three layers, each a library, so that the build keeps wire
# types in session/: runner/ (the Runner interface, the idle runner) and
# train/ (the training runner) do not link zshard_proto, so a
# zshard/v1/*.pb.h included below session/ does not compile
# (worker_layers_test builds a probe that tries).
add_library(zshard_worker_runner
  ${CMAKE_CURRENT_LIST_DIR}/runner/idle_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/runner/workload_config.cc
)
target_include_directories(zshard_worker_runner PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(zshard_worker_runner PUBLIC
  zshard_common zshard_plan zshard_job zshard_checkpoint
  absl::status absl::statusor absl::strings absl::synchronization absl::time
  nlohmann_json::nlohmann_json)

add_library(zshard_worker_train
  ${CMAKE_CURRENT_LIST_DIR}/train/epoch_builder.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/trainer_rendezvous.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/step_checkpoint.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/train_states.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/train_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/train_runner_run.cc
)
target_link_libraries(zshard_worker_train PUBLIC
  zshard_worker_runner zshard_engine zshard_reshard zshard_checkpoint
  zshard_trainer zshard_job Threads::Threads)

# session/: the coordinator session over gRPC, the only layer with protos.
add_library(zshard_worker
  ${CMAKE_CURRENT_LIST_DIR}/session/coordinator_kv_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/coordinator_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/coordinator_session_rpc.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/health_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/model_intake.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/telemetry_stream.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/transition_handler.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/worker_flags.cc
)
target_link_libraries(zshard_worker PUBLIC
  zshard_worker_train zshard_common zshard_channel zshard_flags
  zshard_grpc_common zshard_proto zshard_job
  absl::status absl::statusor absl::strings absl::synchronization
  absl::time nlohmann_json::nlohmann_json Threads::Threads
  PkgConfig::ZSHARD_WORKER_HTTPLIB)

add_executable(zshard-worker ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(zshard-worker PRIVATE zshard_worker)
