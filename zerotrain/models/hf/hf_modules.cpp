#include "zerotrain/models/hf/hf_modules.h"

#include <ATen/ATen.h>

namespace zerotrain::models::hf {

at::Tensor ParamMaker::make(const std::string& name, at::IntArrayRef shape) {
  at::Tensor t = at::empty(shape, at::kFloat);
  names_[t.unsafeGetTensorImpl()] = name;
  return t;
}

const std::string* ParamMaker::name_of(const at::Tensor& param) const {
  const auto it = names_.find(param.unsafeGetTensorImpl());
  return it == names_.end() ? nullptr : &it->second;
}

LinearImpl::LinearImpl(ParamMaker& make, const std::string& name, int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", make.make(name + ".weight", {out, in}));
  if (with_bias) bias = register_parameter("bias", make.make(name + ".bias", {out}));
}

at::Tensor LinearImpl::forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

EmbeddingImpl::EmbeddingImpl(ParamMaker& make, const std::string& name, int64_t count, int64_t dim) {
  weight = register_parameter("weight", make.make(name + ".weight", {count, dim}));
}

at::Tensor EmbeddingImpl::forward(const at::Tensor& ids) { return at::embedding(weight, ids); }

TiedHeadImpl::TiedHeadImpl(at::Tensor embedding) { weight = register_parameter("weight", std::move(embedding)); }

at::Tensor TiedHeadImpl::forward(const at::Tensor& x) { return at::linear(x, weight); }

LmHead::LmHead(torch::nn::Module& lm, ParamMaker& make, const HfModelConfig& c, const at::Tensor& token_weight) {
  if (c.tie_word_embeddings) {
    tied_ = lm.register_module("lm_head", zerotrain::Sharded<TiedHead>(TiedHead(token_weight)));
  } else {
    own_ = lm.register_module("lm_head",
                              zerotrain::Sharded<Linear>(Linear(make, "lm_head", c.hidden_size, c.vocab_size, false)));
  }
}

at::Tensor LmHead::operator()(const at::Tensor& x) { return tied_ ? tied_(x) : own_(x); }

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  at::Tensor key = k, value = v;
  const int64_t groups = q.size(1) / k.size(1);
  if (groups > 1) {
    // transformers' repeat_kv: kv head j serves query heads j * groups .. (j + 1) * groups - 1.
    key = k.repeat_interleave(groups, 1);
    value = v.repeat_interleave(groups, 1);
  }
  if (mask.defined()) return at::scaled_dot_product_attention(q, key, value, mask, 0.0, /*is_causal=*/false);
  return at::scaled_dot_product_attention(q, key, value, {}, 0.0, /*is_causal=*/true);
}

}  // namespace zerotrain::models::hf
