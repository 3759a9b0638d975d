// zerotrain._C.HfWeights: a Hugging Face model folder's safetensors weights as the C++
// loader reads them (models/hf/hf_weights.h: the index and every header checked, a shard
// named outside the folder refused), for zerotrain.hf's ZeRO-3 from_pretrained: each rank
// reads exactly the elements of its chunks, with pread, straight into them.
#include <map>
#include <memory>

#include "bindings.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/models/hf/hf_load.h"
#include "zerotrain/models/hf/hf_weights.h"

namespace zerotrain::python {
namespace {

namespace hf = models::hf;

class FolderWeights {
 public:
  FolderWeights(const std::string& dir, const std::string& variant)
      : weights_(hf::HfWeights::open(dir, {.variant = variant})) {}

  std::vector<std::string> keys() const { return weights_.names(); }
  std::vector<int64_t> shape(const std::string& key) const { return weights_.at(key).entry.shape; }

  // The flat elements [begin, end) of `key` into `out` (1-D, end - begin elements, any dtype).
  void read_range(const std::string& key, int64_t begin, int64_t end, const at::Tensor& out) {
    if (end <= begin) return;
    const hf::HfTensorLocation& where = weights_.at(key);
    hf::read_elements(file_of(where), where, begin, end - begin, out);
  }

  // The whole tensor in its stored dtype (buffers: small, and every rank keeps them whole).
  at::Tensor read(const std::string& key) {
    const hf::HfTensorLocation& where = weights_.at(key);
    at::Tensor out = at::empty(where.entry.shape, at::TensorOptions().dtype(hf::scalar_type_of(where.entry.dtype)));
    hf::read_elements(file_of(where), where, 0, out.numel(), out);
    return out;
  }

  void close() { open_.clear(); }

 private:
  const files::InputFile& file_of(const hf::HfTensorLocation& where) {
    auto& file = open_[where.file];
    if (!file) {
      file = std::make_unique<files::InputFile>(where.file, files::InputFileOptions{.what = "safetensors file"});
    }
    return *file;
  }

  hf::HfWeights weights_;
  std::map<std::filesystem::path, std::unique_ptr<files::InputFile>> open_;
};

}  // namespace

void bind_hf_weights(py::module_& m) {
  py::class_<FolderWeights>(m, "HfWeights",
      "The safetensors weights of a model folder (model.safetensors, or the shards its index lists), read by ranges.")
      .def(py::init<const std::string&, const std::string&>(), py::arg("directory"), py::arg("variant") = "")
      .def("keys", &FolderWeights::keys)
      .def("shape", [](const FolderWeights& w, const std::string& key) {
        const auto shape = w.shape(key);
        return py::tuple(py::cast(shape));
      })
      .def("read_range", [](FolderWeights& w, const std::string& key, int64_t begin, int64_t end,
                            const at::Tensor& out) {
        py::gil_scoped_release no_gil;
        w.read_range(key, begin, end, out);
      }, py::arg("key"), py::arg("begin"), py::arg("end"), py::arg("out"))
      .def("read", [](FolderWeights& w, const std::string& key) {
        py::gil_scoped_release no_gil;
        return w.read(key);
      })
      .def("close", &FolderWeights::close);
}

}  // namespace zerotrain::python
