// Config::visit: the top-level keys, in the order of DeepSpeed's config reference.
#pragma once

namespace zerotrain::config {

template <class V>
void Config::visit(V& v) {
  v.field("train_batch_size", train_batch_size, {.min = 1});
  v.field("train_micro_batch_size_per_gpu", train_micro_batch_size_per_gpu, {.min = 1});
  v.field("gradient_accumulation_steps", gradient_accumulation_steps, {.min = 1});
  v.field("steps_per_print", steps_per_print, {.min = 1});
  v.field("wall_clock_breakdown", wall_clock_breakdown);
  v.field("memory_breakdown", memory_breakdown);
  v.field("dump_state", dump_state);
  v.field("gradient_clipping", gradient_clipping, {.min = 0.0});
  v.field("prescale_gradients", prescale_gradients);
  v.field("gradient_predivide_factor", gradient_predivide_factor, {.min = 0.0});
  v.field("communication_data_type", communication_data_type);
  v.field("seq_parallel_comm_data_type", seq_parallel_comm_data_type, {.unsupported = "sequence parallelism"});
  v.field("sparse_gradients", sparse_gradients, {.unsupported = "sparse gradients"});
  v.field("disable_allgather", disable_allgather, {.unsupported = "disable_allgather"});
  v.field("zero_allow_untested_optimizer", zero_allow_untested_optimizer);
  v.field("zero_force_ds_cpu_optimizer", zero_force_ds_cpu_optimizer);
  v.field("graph_harvesting", graph_harvesting, {.unsupported = "CUDA graph harvesting"});
  v.field("vocabulary_size", vocabulary_size, {.min = 1});
  v.field("dataloader_drop_last", dataloader_drop_last);
  v.field("use_data_before_expert_parallelism", use_data_before_expert_parallelism,
          {.unsupported = "expert parallelism"});

  v.field("fp16", fp16);
  v.field("bf16", bf16, {.deprecated_alias = "bfloat16"});
  v.field("optimizer", optimizer);
  v.field("scheduler", scheduler);
  v.field("zero_optimization", zero_optimization);
  v.field("aio", aio);
  v.field("data_types", data_types);
  v.field("activation_checkpointing", activation_checkpointing);
  v.field("flops_profiler", flops_profiler);
  v.field("comms_logger", comms_logger);
  v.field("tensorboard", tensorboard);
  v.field("csv_monitor", csv_monitor);
  v.field("wandb", wandb);
  v.field("checkpoint", checkpoint);
  v.field("timers", timers);
  v.field("progressive_layer_drop", progressive_layer_drop);
  v.field("comm", comm);

  v.feature_block("amp", amp, "apex AMP (use fp16 or bf16)");
  v.feature_block("comet", comet, "the Comet monitor");
  v.feature_block("pipeline", pipeline, "pipeline parallelism");
  v.feature_block("hybrid_engine", hybrid_engine, "the hybrid (RLHF) engine");
  v.feature_block("tensor_parallel", tensor_parallel, "tensor parallelism");
  v.feature_block("autotuning", autotuning, "the autotuner");
  v.feature_block("compression_training", compression_training, "compression training");
  v.feature_block("quantize_training", quantize_training, "quantized training (MoQ)");
  v.feature_block("eigenvalue", eigenvalue, "eigenvalue computation");
  v.feature_block("sparse_attention", sparse_attention, "sparse attention");
  v.feature_block("curriculum_learning", curriculum_learning, "curriculum learning");
  v.feature_block("data_efficiency", data_efficiency, "data efficiency (curriculum, random-LTD)");
  v.feature_block("nebula", nebula, "Nebula checkpointing");
  v.feature_block("weight_quantization", weight_quantization, "weight quantization");

  v.removed("elasticity",
            "DeepSpeed removed elastic training (PR #8563); delete the block. To change the "
            "world size, resume from a checkpoint: zerotrain checkpoints reshard to any world size");
}

}  // namespace zerotrain::config
