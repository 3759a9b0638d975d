// visit() of the blocks whose params depend on their `type` (included by schema_optim.h).
#pragma once

#include <variant>

#include "zerotrain/config/diagnostics.h"

namespace zerotrain::config {

// Maps a `type` string to a kind index of the enum, or explains why it cannot.
struct TypeResolution {
  int kind = -1;             // the Kind enum's value; valid when message is empty
  int params_index = -1;     // which alternative of the params variant
  bool not_supported = false;
  std::string message;
  std::string hint;
};
TypeResolution resolve_optimizer_type(const std::string& type);
TypeResolution resolve_scheduler_type(const std::string& type);

// A default-constructed alternative number `index` of a variant.
template <class Variant, size_t I = 0>
Variant make_params(int index) {
  if constexpr (I + 1 < std::variant_size_v<Variant>) {
    if (static_cast<size_t>(index) != I) return make_params<Variant, I + 1>(index);
  }
  return Variant(std::in_place_index<I>);
}

// Reads `type` and then `params` into the params block for that type.
template <class V, class Kind, class Params>
void visit_typed_params(V& v, std::string& type, Kind& kind, Params& params,
                        TypeResolution (*resolve)(const std::string&)) {
  v.field("type", type, {.required = true});
  if constexpr (V::kReading) {
    if (type.empty()) {
      v.ignore("params");
      return;
    }
    TypeResolution r = resolve(type);
    if (!r.message.empty()) {
      auto& diags = v.context().diags;
      r.not_supported ? diags.not_supported(v.path_of("type"), r.message, r.hint)
                      : diags.error(v.path_of("type"), r.message, r.hint);
      v.ignore("params");
      return;
    }
    kind = static_cast<Kind>(r.kind);
    params = make_params<Params>(r.params_index);
  }
  std::visit([&](auto& p) { v.field("params", p); }, params);
}

template <class V>
void OptimizerConfig::visit(V& v) {
  visit_typed_params(v, type, kind, params, &resolve_optimizer_type);
  v.field("legacy_fusion", legacy_fusion);
}

template <class V>
void SchedulerConfig::visit(V& v) {
  visit_typed_params(v, type, kind, params, &resolve_scheduler_type);
}

}  // namespace zerotrain::config
