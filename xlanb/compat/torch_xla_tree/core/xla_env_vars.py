"""`torch_xla.core.xla_env_vars`: the names of the environment variables torch_xla reads (each
constant is its own name). xlanb reads none of them; docs/torch_xla.md maps them to XLANB_*."""

for _name in ("TPUVM_MODE", "TPU_NUM_DEVICES", "CPU_NUM_DEVICES", "CLOUD_TPU_TASK_ID", "ACCELERATOR_TYPE",
              "WORKER_ID", "TPU_SKIP_MDS_QUERY", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES",
              "TPU_HOST_BOUNDS", "TPU_CHIPS_PER_HOST_BOUNDS", "PJRT_DEVICE", "PJRT_SELECT_DEFAULT_DEVICE",
              "PJRT_LOCAL_PROCESS_RANK", "PJRT_LOCAL_PROCESS_COUNT", "PJRT_DYNAMIC_PLUGINS",
              "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_PROCESS_BOUNDS", "TPU_PROCESS_ADDRESSES", "TPU_VISIBLE_CHIPS",
              "TPU_PROCESS_PORT", "PJRT_CPU_ASYNC_CLIENT", "PJRT_DIST_SERVICE_ADDR", "LOCAL_RANK", "RANK",
              "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
    globals()[_name] = _name
TPU_MESH_CTLER_ADDR = "TPU_MESH_CONTROLLER_ADDRESS"
TPU_MESH_CTLER_PORT = "TPU_MESH_CONTROLLER_PORT"
del _name
