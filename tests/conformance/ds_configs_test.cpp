// Conformance: `zerotrain config check` over the 143 real DeepSpeed configs in
// shared/conformance/ds_configs. Each file's expected outcome is kept here, with the JSON
// path of the first problem and the reason in a few words (docs/config.md lists them too).
// A file added to or removed from the corpus fails the test until this table says what to
// expect of it.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "zerotrain/config/config.h"
#include "zerotrain/config/resolve.h"

namespace zerotrain::config {
namespace {

enum Outcome { kAccepted, kRejected, kNotSupported };

struct Expected {
  const char* file;
  Outcome outcome;
  const char* first_problem_path;   // "" when accepted
  const char* reason;
};

// Names the file in gtest's output instead of dumping the struct's bytes.
void PrintTo(const Expected& e, std::ostream* os) { *os << e.file; }

const Expected kCorpus[] = {
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3__examples__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_3_config.json", kRejected, "zero_optimization.stage3_param_persitence_threshold",
     "unknown key (did you mean stage3_param_persistence_threshold?)"},
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_3_config_release.json", kRejected, "zero_optimization.stage3_param_persitance_threshold",
     "unknown key (did you mean stage3_param_persistence_threshold?)"},
    {"DeepSpeedExamples__Megatron-LM__model_size_test__ds_zero-offload_11B_config.json", kRejected, "zero_optimization.comm_overlap",
     "unknown key (did you mean overlap_comm?)"},
    {"DeepSpeedExamples__Megatron-LM__model_size_test__ds_zero-offload_13B_config.json", kRejected, "zero_optimization.comm_overlap",
     "unknown key (did you mean overlap_comm?)"},
    {"DeepSpeedExamples__Megatron-LM__model_size_test_with_acumulated_grad__ds_zero-offload_150B_config.json", kRejected, "zero_optimization.comm_overlap",
     "unknown key (did you mean overlap_comm?)"},
    {"DeepSpeedExamples__Megatron-LM__scripts__ds_config.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__Megatron-LM__scripts__ds_zero2_cpu_offload_config.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeedExamples__Megatron-LM__scripts__ds_zero3_config.json", kRejected, "zero_optimization.stage3_param_persitance_threshold",
     "unknown key (did you mean stage3_param_persistence_threshold?)"},
    {"DeepSpeedExamples__Megatron-LM__scripts__ds_zero_stage_2_config.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__Megatron-LM__scripts__ds_zerodual_config.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeedExamples__QANet-Pytorch__ds_bsz512_1cycle.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__QANet-Pytorch__ds_bsz512_warmup.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__QANet-Pytorch__short_deepspeed_adam.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__QANet-Pytorch__short_deepspeed_warmup.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__autotuning__ds_config.json", kRejected, "train_micro_batch_size_per_gpu",
     "wrong type: expected an integer or null or 'auto', got [8] (a list)"},
    {"DeepSpeedExamples__bing_bert__deepspeed_bsz16K_lamb_config.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__bing_bert__deepspeed_bsz16K_lamb_config_seq512.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__bing_bert__deepspeed_bsz32K_lamb_config_seq512.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__bing_bert__deepspeed_bsz4096_adam_config.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__bing_bert__deepspeed_bsz64K_lamb_config_seq128.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__cifar__ds_config_lamb.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__cifar__ds_config_onebitlamb.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitLamb'"},
    {"DeepSpeedExamples__compression__bert__config__XTC__ds_config_W1A8_Qgroup1_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__XTC__ds_config_layer_reduction_W1Q8_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__XTC__ds_config_layer_reduction_fp16.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__ZeroQuant__ds_config_W48A8_Qgroup48_lkd_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__ZeroQuant__ds_config_W8A8_Qgroup48_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__compression__bert__config__ds_config_W1A8_Qgroup64_fp16.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__ds_config_W1A8_Qgroup64_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__bert__config__ds_config_W1or2A8_Qgroup64_fp16.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__cifar__config__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__compression__cifar__config__ds_config_channel_prune.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__gpt2__config__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__compression__gpt2__config__ds_config_W4or8A8_Qgroup64_fp16.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__gpt2__config__ds_config_W4or8A8_Qgroup64_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__gpt2__config__ds_config_W8A8_Qgroup64_fp16.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__gpt2__config__ds_config_W8A8_Qgroup64_fp32.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__compression__leap__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__data_efficiency__vit_finetuning__config__ds_config_imagenet.json", kNotSupported, "data_efficiency",
     "not supported yet: data efficiency"},
    {"DeepSpeedExamples__hf-transformers__ds_config.json", kRejected, "train_batch_size",
     "no batch size given"},
    {"DeepSpeedExamples__inference__huggingface__ds_config_cpu.json", kRejected, "zero_optimization.stage3_max_reuse_distance",
     "out of range: must be at least 0, got -1"},
    {"DeepSpeedExamples__inference__huggingface__ds_config_gpu.json", kRejected, "zero_optimization.stage3_max_reuse_distance",
     "out of range: must be at least 0, got -1"},
    {"DeepSpeedExamples__inference__huggingface__ds_config_nvme.json", kRejected, "zero_optimization.stage3_max_reuse_distance",
     "out of range: must be at least 0, got -1"},
    {"DeepSpeedExamples__inference__huggingface__gpt2xl_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__megatron__Megatron-LM-v1.1.5-3D_parallelism__examples__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__megatron__Megatron-LM-v1.1.5-3D_parallelism__examples__ds_zero_stage_2_config.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__megatron__Megatron-LM-v1.1.5-ZeRO3__curriculum_learning__ds_zero_stage_2_config_baseline.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeedExamples__megatron__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_3_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__megatron__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_3_config_release.json", kRejected, "zero_optimization.cpu_offload_params",
     "unknown key (did you mean cpu_offload_param?)"},
    {"DeepSpeedExamples__megatron__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_infinity_config.json", kRejected, "zero_optimization.stage3_param_persitence_threshold",
     "unknown key (did you mean stage3_param_persistence_threshold?)"},
    {"DeepSpeedExamples__megatron__Megatron-LM__scripts__ds_zero-offload_config.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeedExamples__megatron__Megatron-LM__scripts__ds_zero2_config.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeedExamples__mnist__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__model_compression__bert__config__ds_config_W1A8_64Qgoup_fp16.json", kNotSupported, "compression_training",
     "not supported yet: compression training"},
    {"DeepSpeedExamples__qanet__deepspeed_bsz32_warmup.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__qanet__deepspeed_bsz512_1cycle.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__qanet__deepspeed_bsz512_fixedlr.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__qanet__deepspeed_bsz512_warmup.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__random_ltd__gpt_finetuning__config__ds_config.json", kRejected, "dynamic_train",
     "unknown key"},
    {"DeepSpeedExamples__resnet__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__BingBertGlue__glue_bert_base.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__BingBertSquad__1-bit_adam__mpi_ethernet__deepspeed_onebitadam_bsz96_config.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OnebitAdam'"},
    {"DeepSpeedExamples__training__BingBertSquad__1-bit_adam__mpi_infiniband__deepspeed_onebitadam_bsz96_config.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OnebitAdam'"},
    {"DeepSpeedExamples__training__BingBertSquad__1-bit_adam__nccl__deepspeed_onebitadam_bsz96_config.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OnebitAdam'"},
    {"DeepSpeedExamples__training__BingBertSquad__deepspeed_bsz24_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__MoQ__huggingface-transformers__examples__tests__deepspeed__ds_config.json", kRejected, "train_batch_size",
     "no batch size given"},
    {"DeepSpeedExamples__training__alpaca-lora-zero3__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__bert-base__ds_config_tune.json", kNotSupported, "autotuning",
     "not supported yet: the autotuner"},
    {"DeepSpeedExamples__training__autotuning__hf__bert-large__ds_config_tune.json", kNotSupported, "autotuning",
     "not supported yet: the autotuner"},
    {"DeepSpeedExamples__training__autotuning__hf__deberta__ds_config_fp16_tune.json", kNotSupported, "autotuning",
     "not supported yet: the autotuner"},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_fp16_tune.json", kNotSupported, "autotuning",
     "not supported yet: the autotuner"},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_fp16_z0.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_fp16_z1.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_fp16_z2.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_fp16_z3.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_tune.json", kNotSupported, "autotuning",
     "not supported yet: the autotuner"},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_z0.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_z1.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_z2.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__autotuning__hf__dsconfigs__ds_config_z3.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__bing_bert__01_adam__mpi_ethernet__deepspeed_bsz4k_01adam_config_seq128_mpi_ethernet.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'ZeroOneAdam'"},
    {"DeepSpeedExamples__training__bing_bert__01_adam__mpi_ethernet__deepspeed_bsz4k_01adam_config_seq512_mpi_ethernet.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'ZeroOneAdam'"},
    {"DeepSpeedExamples__training__bing_bert__1-bit_adam__mpi_ethernet__deepspeed_bsz4k_onebitadam_config_seq128_mpi_ethernet.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitAdam'"},
    {"DeepSpeedExamples__training__bing_bert__1-bit_adam__mpi_infiniband__deepspeed_bsz4k_onebitadam_config_seq128_mpi_infiniband.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitAdam'"},
    {"DeepSpeedExamples__training__bing_bert__1-bit_adam__nccl__deepspeed_bsz4k_onebitadam_config_seq128_nccl.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitAdam'"},
    {"DeepSpeedExamples__training__bing_bert__1-bit_lamb__mpi_ethernet__deepspeed_bsz32k_onebitlamb_config_seq512_mpi_ethernet.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitLamb'"},
    {"DeepSpeedExamples__training__bing_bert__1-bit_lamb__mpi_ethernet__deepspeed_bsz64k_onebitlamb_config_seq128_mpi_ethernet.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitLamb'"},
    {"DeepSpeedExamples__training__bing_bert__1-bit_lamb__mpi_infiniband__deepspeed_bsz32k_onebitlamb_config_seq512_mpi_infiniband.json", kNotSupported, "optimizer.type",
     "not supported yet: optimizer 'OneBitLamb'"},
    {"DeepSpeedExamples__training__bing_bert__deepspeed_bsz32k_lamb_config_seq512.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__bing_bert__deepspeed_bsz4k_progressive_layer_drop_config_seq128.json", kNotSupported, "progressive_layer_drop.enabled",
     "not supported yet: progressive layer drop"},
    {"DeepSpeedExamples__training__bing_bert__deepspeed_bsz64k_lamb_config_seq128.json", kNotSupported, "sparse_attention",
     "not supported yet: sparse attention"},
    {"DeepSpeedExamples__training__bing_bert__glue_bert_base.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__bing_bert__glue_bert_large.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__cifar__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__data_efficiency__gpt_finetuning__config__ds_config_gpt_base_random_ltd.json", kNotSupported, "data_efficiency",
     "not supported yet: data efficiency"},
    {"DeepSpeedExamples__training__data_efficiency__gpt_finetuning__config__ds_config_gpt_medium_random_ltd.json", kNotSupported, "data_efficiency",
     "not supported yet: data efficiency"},
    {"DeepSpeedExamples__training__data_efficiency__vit_finetuning__config__ds_config_cifar_random_ltd.json", kNotSupported, "data_efficiency",
     "not supported yet: data efficiency"},
    {"DeepSpeedExamples__training__data_efficiency__vit_finetuning__config__ds_config_imagenet_random_ltd.json", kNotSupported, "data_efficiency",
     "not supported yet: data efficiency"},
    {"DeepSpeedExamples__training__gan__gan_deepspeed_config.json", kAccepted, "",
     ""},
    {"DeepSpeedExamples__training__imagenet__config__ds_config.json", kRejected, "cuda_visible_devices",
     "unknown key"},
    {"DeepSpeedExamples__training__imagenet__config__ds_fp16_config.json", kRejected, "cuda_visible_devices",
     "unknown key"},
    {"DeepSpeedExamples__training__imagenet__config__ds_fp16_z1_config.json", kRejected, "cuda_visible_devices",
     "unknown key"},
    {"DeepSpeedExamples__training__pipeline_parallelism__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__DeepSpeedExamples__Megatron-LM__scripts__ds_zero-offload_10B_config.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__DeepSpeedExamples__Megatron-LM__scripts__ds_zero2_pretrain_gpt2XL_model_parallel_config.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__DeepSpeedExamples__Megatron-LM__scripts__ds_zero2_pretrain_gpt2XL_model_parallel_synthetic_data_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__DeepSpeedExamples__Megatron-LM__scripts__multinode_ds_zero2_pretrain_gpt2XL_model_parallel_config.json", kRejected, "train_batch_size",
     "128 != 32 x 1 x 1 at world size 1 (a 4-rank config); also activation checkpointing options"},
    {"DeepSpeed__DeepSpeedExamples__bing_bert__deepspeed_bsz64k_lamb_config_seq128.json", kNotSupported, "sparse_attention",
     "not supported yet: sparse attention"},
    {"DeepSpeed__DeepSpeedExamples__cifar__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__deepspeed__autotuning__config_templates__template_zero0.json", kRejected, "train_batch_size",
     "no batch size given"},
    {"DeepSpeed__deepspeed__autotuning__config_templates__template_zero1.json", kRejected, "train_batch_size",
     "no batch size given"},
    {"DeepSpeed__deepspeed__autotuning__config_templates__template_zero2.json", kRejected, "train_batch_size",
     "no batch size given"},
    {"DeepSpeed__deepspeed__autotuning__config_templates__template_zero3.json", kRejected, "train_batch_size",
     "no batch size given"},
    {"DeepSpeed__deepspeed__autotuning__tests__ds_config.json", kRejected, "zero_optimization.stage",
     "wrong type: expected an integer, got '1' (a string)"},
    {"DeepSpeed__examples__paro__llama__ds_config.json", kRejected, "zero_optimization.paro_strategy",
     "unknown key"},
    {"DeepSpeed__tests__accelerator__ds_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__hybrid_engine__hybrid_engine_config.json", kRejected, "zero_optimization.offload_param",
     "parameter offload needs ZeRO stage 3, but stage is 0"},
    {"DeepSpeed__tests__model__BingBertSquad__deepspeed_bsz24_fp16_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__BingBertSquad__deepspeed_bsz24_fp16_eigenvalue_quantize_config.json", kNotSupported, "quantize_training",
     "not supported yet: quantized training (MoQ), eigenvalue"},
    {"DeepSpeed__tests__model__BingBertSquad__deepspeed_bsz24_fp16_zero2_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__BingBertSquad__deepspeed_bsz24_fp32_config.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs4.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs4_zero1.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs4_zero2.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs4_zero2_offload.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8.json", kRejected, "optimizer.params.max_grad_norm",
     "max_grad_norm in optimizer params (DeepSpeed raises ValueError too)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_no_zero.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero0_gas10.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero0_gas3.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero1.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero2.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero2_gas10.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero2_gas3.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero2_offload.json", kNotSupported, "activation_checkpointing.partition_activations",
     "not supported yet: partitioned activations (model parallelism)"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_scheduler.json", kAccepted, "",
     ""},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_perf_bs16.json", kNotSupported, "disable_allgather",
     "not supported yet: disable_allgather"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_perf_bs32.json", kNotSupported, "disable_allgather",
     "not supported yet: disable_allgather"},
    {"DeepSpeed__tests__model__Megatron_GPT2__ds_config_perf_bs8.json", kNotSupported, "disable_allgather",
     "not supported yet: disable_allgather"},
    {"DeepSpeed__tests__torch_compile__ds_config_z2.json", kRejected, "bf16.loss_scale",
     "unknown key (did you mean fp16.loss_scale? (it belongs there))"},
    {"DeepSpeed__tests__torch_compile__ds_config_z3.json", kRejected, "bf16.loss_scale",
     "unknown key (did you mean fp16.loss_scale? (it belongs there))"},
    {"DeepSpeed__tests__unit__ds_batch_config.json", kAccepted, "",
     ""},
};

std::filesystem::path corpus_dir() {
  if (const char* dir = std::getenv("ZEROTRAIN_CONFORMANCE_DIR")) return dir;
  return ZEROTRAIN_CONFORMANCE_DIR;
}

// What `zerotrain config check FILE` does (world size 1).
Config check(const std::filesystem::path& file) {
  Config c = load_config(read_json_file(file), {.origin = file.filename().string()});
  if (c.diagnostics.count(Severity::kError) == 0) derive_batch(c, 1);   // as `config check` does
  return c;
}

std::string problems(const Config& c) {
  std::string out;
  for (const auto& d : c.diagnostics.items()) {
    if (d.severity != Severity::kWarning) out += "  " + d.to_string() + "\n";
  }
  return out;
}

// A clone without the corpus beside it (../shared/conformance) skips these tests, and says so:
// a skip, never a pass.
#define SKIP_WITHOUT_CORPUS()                                                                      \
  if (!std::filesystem::is_directory(corpus_dir()))                                                \
  GTEST_SKIP() << "skipped: ../shared/conformance not found (" << corpus_dir().string()            \
               << " is not a directory; ZEROTRAIN_CONFORMANCE_DIR names another)"

TEST(Conformance, TableCoversTheCorpusExactly) {
  SKIP_WITHOUT_CORPUS();
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir())) {
    if (entry.path().extension() == ".json") on_disk.insert(entry.path().filename().string());
  }
  for (const auto& e : kCorpus) in_table.insert(e.file);
  for (const auto& f : on_disk) EXPECT_TRUE(in_table.count(f)) << "new corpus file, add it to kCorpus: " << f;
  for (const auto& f : in_table) EXPECT_TRUE(on_disk.count(f)) << "kCorpus names a missing file: " << f;
  EXPECT_EQ(on_disk.size(), 143u);
}

class ConformanceFile : public ::testing::TestWithParam<Expected> {};

TEST_P(ConformanceFile, HasItsDocumentedOutcome) {
  SKIP_WITHOUT_CORPUS();
  const Expected& e = GetParam();
  auto path = corpus_dir() / e.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  Config c = check(path);
  size_t errors = c.diagnostics.count(Severity::kError);
  size_t unsupported = c.diagnostics.count(Severity::kNotSupported);
  switch (e.outcome) {
    case kAccepted:
      EXPECT_EQ(errors + unsupported, 0u) << e.file << " should be accepted:\n" << problems(c);
      break;
    case kRejected:
      EXPECT_GT(errors, 0u) << e.file << " should be rejected (" << e.reason << ")";
      break;
    case kNotSupported:
      EXPECT_EQ(errors, 0u) << e.file << " should only ask for unsupported features:\n" << problems(c);
      EXPECT_GT(unsupported, 0u) << e.file << " should be not supported (" << e.reason << ")";
      break;
  }
  if (e.outcome != kAccepted) {
    ASSERT_FALSE(c.diagnostics.items().empty());
    bool found = false;
    for (const auto& d : c.diagnostics.items()) {
      found = found || (d.severity != Severity::kWarning && d.path == e.first_problem_path);
    }
    EXPECT_TRUE(found) << e.file << ": expected a problem at " << e.first_problem_path << ", got:\n" << problems(c);
  }
}

std::string test_name(const ::testing::TestParamInfo<Expected>& info) {
  std::string name = std::to_string(info.index) + "_" + info.param.file;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name.substr(0, name.size() - 5);   // drop "_json"
}

INSTANTIATE_TEST_SUITE_P(Corpus, ConformanceFile, ::testing::ValuesIn(kCorpus), test_name);

}  // namespace
}  // namespace zerotrain::config
