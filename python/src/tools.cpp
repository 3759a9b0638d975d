// What the Python package needs besides the engine: DeepSpeed's estimators (the C++ ones,
// digit for digit), reading a checkpoint into tensors and consolidating it (the streaming
// C++ reader), the manifest, and config checking.
#include "bindings.h"
#include "json_convert.h"

#include "zerotrain/checkpoint/consolidate.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/checkpoint/names.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/comm/process_group/process_group.h"
#include "zerotrain/comm/rendezvous/job_token.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/comm/rendezvous/store_listener.h"
#include "zerotrain/core/error.h"
#include "zerotrain/checkpoint/protocol/tensor_dtype.h"
#include "zerotrain/estimate/deepspeed_estimator.h"

namespace zerotrain::python {
namespace {

namespace ckpt = checkpoint;

ckpt::Dtype output_dtype(const std::string& name) {
  if (name == "fp32") return ckpt::Dtype::kF32;
  if (name == "bf16") return ckpt::Dtype::kBF16;
  if (name == "fp16") return ckpt::Dtype::kF16;
  throw UsageError("dtype " + name + ": give \"fp32\", \"bf16\" or \"fp16\" (the dtype the parameters are returned in)");
}

// Every tensor of a tag by name (parameters whole in `dtype`, frozen ones too, buffers as
// saved), read one at a time through the checked reader.
std::vector<std::pair<std::string, at::Tensor>> read_state_dict(const std::string& dir, const std::string& tag,
                                                                const std::string& dtype) {
  const ckpt::LocatedTag located = ckpt::locate_tag(dir, tag);
  ckpt::CheckpointReader reader(located.tag_dir);
  ckpt::ConsolidateOptions options;
  options.dtype = output_dtype(dtype);
  const auto plan = ckpt::plan_consolidation(reader.manifest(), options, (located.tag_dir / "manifest.json").string());
  ckpt::check_plan_pieces(reader, plan);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& t : plan.tensors) {
    at::Tensor saved = at::empty(t.shape, at::TensorOptions().dtype(checkpoint::scalar_type(t.saved)));
    ckpt::read_planned_tensor(reader, t, static_cast<char*>(saved.data_ptr()));
    out.emplace_back(t.name, t.dtype == t.saved ? saved : saved.to(checkpoint::scalar_type(t.dtype)));
  }
  return out;
}

}  // namespace

void bind_tools(py::module_& m) {
  m.attr("CHECKPOINT_DEFAULT_TAG_PREFIX") = ckpt::kDefaultTagPrefix;
  m.attr("CLIENT_STATE_SHARED_PARAMS_KEY") = ckpt::kSharedParamsKey;
  m.attr("CLIENT_STATE_LR_SCHEDULER_KEY") = ckpt::kLrSchedulerKey;
  m.def("rendezvous_from_env", [] {
    const comm::RendezvousInfo r = comm::rendezvous_from_env();
    py::dict d;
    d["source"] = comm::to_string(r.source);
    d["rank"] = r.rank;
    d["world_size"] = r.world_size;
    d["local_rank"] = r.local_rank;
    d["local_world_size"] = r.local_world_size;
    d["master_addr"] = r.master_addr;
    d["master_port"] = r.master_port;
    return d;
  }, "Where this process is in its job, read from the launcher's environment as the engine reads it.");
  // torch.distributed's store made as the engine makes its own (zerotrain/comm/rendezvous/store.h).
  m.def("listen_for_store", [](const std::string& host, int port, bool spans_hosts) {
    const auto listener = comm::detail::listen_for_store(host, port, spans_hosts);
    return py::make_tuple(listener.fd, listener.port);
  }, "A socket listening on MASTER_ADDR's address only, for TCPStore(master_listen_fd=...): (fd, port).");
  m.def("check_job_token", [](const py::object& store, int rank, double timeout_s) {
    auto held = store.cast<c10::intrusive_ptr<c10d::Store>>();
    py::gil_scoped_release no_gil;
    comm::detail::check_job_token(*held, rank, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }, "Raises CommError when the store belongs to another job (ZEROTRAIN_JOB_TOKEN).");
  m.def("release_adopted_groups", [] {
    py::gil_scoped_release no_gil;   // a group's destructor joins threads that may want the GIL
    return comm::release_adopted_groups();
  }, "Drops every engine's hold on torch.distributed's group (zerotrain/comm/process_group/process_group.h).");
  m.def("zero2_report", [](double total_params, int64_t gpus_per_node, int64_t nodes, double buffer_factor) {
    return estimate::zero2_report(total_params, {gpus_per_node, nodes, buffer_factor});
  });
  m.def("zero3_report", [](double total_params, double largest_layer, int64_t gpus_per_node, int64_t nodes,
                           double buffer_factor) {
    return estimate::zero3_report(total_params, largest_layer, {gpus_per_node, nodes, buffer_factor});
  });
  m.def("zero2_mem_needs", [](double total_params, int64_t gpus_per_node, int64_t nodes, double buffer_factor,
                              bool cpu_offload) {
    const auto n = estimate::zero2_mem_needs(total_params, {gpus_per_node, nodes, buffer_factor}, cpu_offload);
    return py::make_tuple(n.cpu_bytes, n.gpu_bytes);
  });
  m.def("zero3_mem_needs", [](double total_params, double largest_layer, int64_t gpus_per_node, int64_t nodes,
                              double buffer_factor, bool cpu_offload, bool cpu_offload_params, bool zero_init) {
    const auto n = estimate::zero3_mem_needs(total_params, largest_layer, {gpus_per_node, nodes, buffer_factor},
                                             cpu_offload, cpu_offload_params, zero_init);
    return py::make_tuple(n.cpu_bytes, n.gpu_bytes);
  });

  m.def("read_state_dict", [](const std::string& dir, const std::string& tag, const std::string& dtype) {
    py::gil_scoped_release no_gil;
    return read_state_dict(dir, tag, dtype);
  }, py::arg("checkpoint_dir"), py::arg("tag") = "", py::arg("dtype") = "fp32");
  m.def("consolidate", [](const std::string& dir, const std::string& out_dir, const std::string& tag,
                          const std::string& dtype, int64_t max_shard_bytes) {
    ZT_CHECK(max_shard_bytes >= 1, UsageError, "max_shard_size ", max_shard_bytes, ": give a positive size in bytes");
    ckpt::ConsolidateOptions options;
    options.dtype = output_dtype(dtype);
    options.max_shard_bytes = max_shard_bytes;
    std::vector<std::string> files;
    {
      py::gil_scoped_release no_gil;
      const ckpt::LocatedTag located = ckpt::locate_tag(dir, tag);
      ckpt::CheckpointReader reader(located.tag_dir);
      for (const auto& f : ckpt::consolidate(reader, out_dir, options).files) files.push_back(f.string());
    }
    return files;
  });
  m.def("read_manifest", [](const std::string& dir, const std::string& tag) {
    config::Json j;
    {
      py::gil_scoped_release no_gil;
      const ckpt::LocatedTag located = ckpt::locate_tag(dir, tag);
      ckpt::CheckpointReader reader(located.tag_dir);
      const auto& man = reader.manifest();
      j["tag_dir"] = located.tag_dir.string();
      j["tag"] = located.tag;
      j["world_size"] = man.world_size;
      j["zero_stage"] = man.zero_stage;
      j["model_dtype"] = man.model_dtype;
      j["client_state"] = man.client_state;
      j["frozen"] = config::Json::array();
      for (const auto& f : man.frozen) j["frozen"].push_back(f.name);
    }
    return to_python(j);
  }, py::arg("checkpoint_dir"), py::arg("tag") = "");
}

}  // namespace zerotrain::python
