// Freeing and re-allocating the memory under a tensor without changing the tensor: every
// view of it (the model's parameters, what autograd saved) keeps its identity, shape and
// offset, and sees the new memory. FSDP's technique (its FlatParameter views); device-agnostic, through
// the storage's own allocator.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

namespace zerotrain::stages::stage3 {

inline bool storage_allocated(const at::Tensor& t) { return t.storage().nbytes() > 0; }

inline void free_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

// Allocates t.numel() elements (uninitialised) under t, which starts at offset 0.
inline void allocate_storage(const at::Tensor& t) {
  // A GPU's caching allocator allocates on the current device, which need not be the
  // tensor's (a model on cuda:1 while cuda:0 is current): make it the tensor's.
  c10::OptionalDeviceGuard guard;
  if (!t.device().is_cpu()) guard.reset_device(t.device());
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  s->set_data_ptr_noswap(s->allocator()->allocate(nbytes));
  s->set_nbytes(nbytes);
}

}  // namespace zerotrain::stages::stage3
