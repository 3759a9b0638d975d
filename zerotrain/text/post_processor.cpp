#include "zerotrain/text/post_processor.h"

#include <map>
#include <string>

namespace zerotrain::text {
namespace {

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void add_special_tokens(std::vector<int32_t>& ids) const override {
    for (const auto& step : steps_) step->add_special_tokens(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// The ids before and after the text: a template with one sequence, $A, resolved at load.
class AroundProcessor final : public PostProcessor {
 public:
  AroundProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void add_special_tokens(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class NoProcessor final : public PostProcessor {
 public:
  void add_special_tokens(std::vector<int32_t>&) const override {}
};

std::unique_ptr<PostProcessor> make_template(const JsonField& field) {
  const JsonField special = field["special_tokens"];
  special.object();
  const JsonField single = field["single"];
  single.array();
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const JsonField item = single[i];
    if (item.has("Sequence")) {
      if (seen_sequence) item.fail("a single-text template has one sequence ($A)");
      seen_sequence = true;
      continue;
    }
    if (!item.has("SpecialToken")) item.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const JsonField name = item["SpecialToken"]["id"];
    if (!special.has(name.string())) name.fail("\"" + name.string() + "\" is not in special_tokens");
    const JsonField token_ids = special[name.string()]["ids"];
    token_ids.array();
    for (size_t k = 0; k < token_ids.size(); ++k) {
      (seen_sequence ? after : before).push_back(static_cast<int32_t>(token_ids[k].integer()));
    }
  }
  if (!seen_sequence) single.fail("the template has no $A: the text itself would be left out");
  return std::make_unique<AroundProcessor>(std::move(before), std::move(after));
}

// Roberta's and Bert's: "cls": ["<s>", 0], "sep": ["</s>", 2].
std::unique_ptr<PostProcessor> make_cls_sep(const JsonField& field) {
  const auto id_of = [](const JsonField& pair) {
    pair.array();
    if (pair.size() != 2) pair.fail("expected [token, id]");
    return static_cast<int32_t>(pair[1].integer());
  };
  return std::make_unique<AroundProcessor>(std::vector<int32_t>{id_of(field["cls"])},
                                           std::vector<int32_t>{id_of(field["sep"])});
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& field) {
  if (field.json().is_null()) return nullptr;
  const std::string& type = field["type"].string();
  if (type == "Sequence") {
    const JsonField list = field["processors"];
    list.array();
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_post_processor(list[i])) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  if (type == "TemplateProcessing") return make_template(field);
  if (type == "RobertaProcessing" || type == "BertProcessing") return make_cls_sep(field);
  if (type == "ByteLevel") return std::make_unique<NoProcessor>();   // it trims offsets only
  field["type"].fail("post-processor type \"" + type +
                     "\" is not supported (supported: TemplateProcessing, RobertaProcessing, BertProcessing, "
                     "ByteLevel, Sequence)");
}

}  // namespace zerotrain::text
