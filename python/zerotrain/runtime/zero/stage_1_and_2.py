"""DeepSpeed's ZeRO-2 memory estimator (deepspeed.runtime.zero.stage_1_and_2), computed and
printed by the C++ estimator, digit for digit."""

from ..._ext import _C


def model_to_params(model):
    """Parameters counted once however often they are registered (DeepSpeed: by data_ptr)."""
    return sum({p.data_ptr(): p.numel() for p in model.parameters()}.values())


def estimate_zero2_model_states_mem_needs(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
                                          additional_buffer_factor=1.5):
    """(cpu_bytes, gpu_bytes) per CPU and per GPU."""
    return _C.zero2_mem_needs(float(total_params), int(num_gpus_per_node), int(num_nodes),
                              float(additional_buffer_factor), bool(cpu_offload))


def estimate_zero2_model_states_mem_needs_all_cold(total_params, num_gpus_per_node=1, num_nodes=1,
                                                   additional_buffer_factor=1.5):
    print(_C.zero2_report(float(total_params), int(num_gpus_per_node), int(num_nodes),
                          float(additional_buffer_factor)), end="")


def estimate_zero2_model_states_mem_needs_all_live(model, num_gpus_per_node=1, num_nodes=1,
                                                   additional_buffer_factor=1.5):
    estimate_zero2_model_states_mem_needs_all_cold(model_to_params(model), num_gpus_per_node, num_nodes,
                                                   additional_buffer_factor)
