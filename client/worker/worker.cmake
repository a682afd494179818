# zshard_worker: the worker daemon's library (coordinator session, runners)
# and the zshard-worker executable (with the re-sharding executor and the
# checkpoint files it drives).
zshard_pkg_check(ZSHARD_WORKER_HTTPLIB cpp-httplib libcpp-httplib-dev)
add_library(zshard_worker
  ${CMAKE_CURRENT_LIST_DIR}/runner/idle_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/runner/workload_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/coordinator_kv_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/coordinator_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/coordinator_session_rpc.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/health_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/telemetry_stream.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/transition_handler.cc
  ${CMAKE_CURRENT_LIST_DIR}/session/worker_flags.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/epoch_builder.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/step_checkpoint.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/train_states.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/train_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/train/train_runner_run.cc
)
target_include_directories(zshard_worker PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(zshard_worker PUBLIC
  zshard_common zshard_channel zshard_flags zshard_grpc_common zshard_proto zshard_engine zshard_job
  zshard_reshard zshard_checkpoint zshard_trainer
  absl::status absl::statusor absl::strings absl::synchronization
  absl::time nlohmann_json::nlohmann_json Threads::Threads
  PkgConfig::ZSHARD_WORKER_HTTPLIB)

add_executable(zshard-worker ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(zshard-worker PRIVATE zshard_worker)
