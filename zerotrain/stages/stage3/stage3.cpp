#include "zerotrain/stages/stage3/stage3.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/stages/stage3/sharded.h"
#include "zerotrain/stages/stage3/storage.h"
#include "zerotrain/stages/unit_plan.h"

namespace zerotrain::stages::stage3 {

// What the Sharded modules hold: forwards to the stage while it lives.
class Stage3::Hooks final : public UnitHooks {
 public:
  explicit Hooks(Stage3* stage) : stage_(stage) {}
  void pre_forward(int unit) override {
    if (stage_) stage_->pre_forward(unit);
  }
  void post_forward(int unit) override {
    if (stage_) stage_->post_forward(unit);
  }
  void pre_backward(int unit) override {
    if (stage_) stage_->pre_backward(unit);
  }
  Stage3* stage_;
};

Stage3::Stage3(config::StageTraits traits, StageContext context, Stage3Options options)
    : Stage2(traits, std::move(context)),
      options_(options),
      swap_(ctx_.param_swap.get()),
      hooks_(std::make_shared<Hooks>(this)) {}

Stage3::~Stage3() { detach(); }

void Stage3::attach(torch::nn::Module& model) {
  map_ = find_units(model, options_.persistence);
  units_.assign(map_.units.size(), {});
  for (size_t u = 1; u < map_.units.size(); ++u) {
    ShardedModule* m = map_.units[u].module;
    m->attach(hooks_, static_cast<int>(u));
    if (!m->presharded()) continue;
    presharded_.push_back(m->presharded());
    for (PreShard& piece : presharded_.back()->params) preshard_of_[piece.param.unsafeGetTensorImpl()] = &piece;
  }
  if (ctx_.comm.rank() != 0) return;
  if (map_.units.size() == 1) {
    ZT_LOG_INFO("ZeRO stage 3: the model has no zerotrain::Sharded units, so all its parameters form one unit "
                "that stays gathered (optimizer states and gradients are still sharded); wrap its blocks in "
                "zerotrain::Sharded<...> or use zerotrain::wrap_sequential to shard the parameters too");
  } else {
    ZT_LOG_INFO("ZeRO stage 3: ", map_.units.size() - 1, " units; ", map_.persistent_count,
                " small parameters (", map_.persistent_numel, " elements) stay gathered");
  }
}

void Stage3::detach() {
  if (!hooks_) return;
  hooks_->stage_ = nullptr;
  // A unit that is not gathered and holds trained parameters is left without their memory.
  for (size_t u = 1; u < map_.units.size(); ++u) {
    map_.units[u].module->detach(!units_[u].gathered && units_[u].numel > 0);
  }
  hooks_.reset();
}

void Stage3::arrange(GroupState& g, int64_t /*bucket_numel: a unit is a bucket*/) {
  ZT_INTERNAL_ASSERT(g.index == stores_.size(), "groups arranged out of order");
  GroupStore& store = stores_.emplace_back();
  std::vector<int64_t> numels;
  std::vector<int> unit;
  for (const auto& p : g.params) {
    numels.push_back(p.numel());
    unit.push_back(map_.owner_of(p.unsafeGetTensorImpl()));
  }
  UnitArrangement a = arrange_units(numels, unit, ctx_.comm.world_size(), ctx_.comm.rank());
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  for (size_t i : a.order) {
    params.push_back(g.params[i]);
    names.push_back(g.param_names[i]);
  }
  g.params = std::move(params);
  g.param_names = std::move(names);
  g.layout = std::move(a.layout);
  store.layout = g.layout;
  store.unit_of_param = std::move(a.unit_of_param);
  store.unit_of_bucket = std::move(a.unit_of_bucket);
  for (size_t b = 0; b < g.layout.buckets().size(); ++b) {
    UnitState& u = units_[store.unit_of_bucket[b]];
    u.buckets.emplace_back(g.index, b);
    u.trainable += static_cast<int>(g.layout.buckets()[b].params.size());
    u.numel += g.layout.buckets()[b].flat.numel;
  }
}

void Stage3::place(GroupState& g) {
  GroupStore& store = stores_[g.index];
  c10::NoGradGuard no_grad;
  if (swap_) {
    std::vector<int64_t> chunks;
    for (const auto& b : g.layout.buckets()) chunks.push_back(b.chunk.numel);
    swap_->add_group(g.index, chunks, ctx_.dtypes.model);
  } else {
    store.param_shard = at::empty({g.layout.shard_numel()}, g.options(ctx_.dtypes.model));
  }
  // One bucket at a time: its full parameters, then this rank's chunk of them, and (unless
  // it is the resident unit's) the full memory freed before the next bucket, so that a
  // model built under ZeroInit is never whole here either.
  for (size_t k = 0; k < g.layout.buckets().size(); ++k) {
    const auto& b = g.layout.buckets()[k];
    at::Tensor full = at::empty({b.flat.numel}, g.options(ctx_.dtypes.model));
    bool all_from_rank0 = true;
    for (size_t i : b.params) {
      const auto r = g.layout.param(i);
      auto view = full.narrow(0, r.offset - b.flat.offset, r.numel);
      if (!place_presharded(g.params[i], view)) {
        view.copy_(g.params[i].detach().reshape(-1));
        all_from_rank0 = false;
      }
      g.params[i].set_data(view.view(g.params[i].sizes()));
    }
    // Every rank starts from rank 0's weights, as DeepSpeed's engine broadcasts them
    // (ZeroInit's chunks already are).
    if (!all_from_rank0) ctx_.comm.broadcast(full, 0).wait();
    store.full.push_back(full);
    const at::Tensor mine = full.narrow(0, b.chunk.offset, b.chunk.numel);
    if (swap_) {
      swap_->write(g.index, k, mine);
    } else {
      store.param_shard.narrow(0, b.shard_offset, b.chunk.numel).copy_(mine);
    }
    if (store.unit_of_bucket[k] != 0) free_storage(full);   // gathered when first used
  }
  units_[0].gathered = true;
}

bool Stage3::place_presharded(const at::Tensor& param, const at::Tensor& flat) {
  auto it = preshard_of_.find(param.unsafeGetTensorImpl());
  if (it == preshard_of_.end()) return false;
  gather_preshard(ctx_.comm, *it->second, flat);
  it->second->chunk = at::Tensor();   // its memory goes now
  preshard_of_.erase(it);
  return true;
}

void Stage3::finish_setup() {
  // Parameters cut by ZeroInit that no group took (frozen, or left out of the client's
  // groups) become whole again: they are not trained, so not sharded either. Gathered in
  // the order they were cut, which is every rank's.
  c10::NoGradGuard no_grad;
  for (const auto& cut : presharded_) {
    for (PreShard& piece : cut->params) {
      if (!piece.chunk.defined()) continue;
      at::Tensor full = at::empty(piece.param.sizes(), piece.param.options());
      gather_preshard(ctx_.comm, piece, full.view(-1));
      piece.param.set_data(full);
      piece.chunk = at::Tensor();
    }
  }
  preshard_of_.clear();
  presharded_.clear();
  for (size_t u = 1; u < map_.units.size(); ++u) map_.units[u].module->drop_presharded();
}

void Stage3::init_master(GroupState& g) {
  // In fp32 the optimizer's master shard is the parameter shard: gathers read the weights
  // it has just stepped, and no second copy exists. In 16 bits it starts from the rounded
  // values, as DeepSpeed's does.
  const at::Tensor& shard = stores_[g.index].param_shard;
  if (!swap_) {
    g.master = ctx_.dtypes.half() ? shard.to(at::kFloat) : shard;
    return;
  }
  // The shard is on disk: the master is read back from it, a bucket at a time.
  g.master = at::empty({g.layout.shard_numel()}, g.options(at::kFloat));
  for (size_t k = 0; k < g.layout.buckets().size(); ++k) {
    const auto& b = g.layout.buckets()[k];
    g.master.narrow(0, b.shard_offset, b.chunk.numel).copy_(swap_->finish_read(swap_->start_read(g.index, k)));
  }
}

void Stage3::refresh_master(GroupState& g) {
  for (size_t k = 0; k < g.layout.buckets().size(); ++k) {
    if (units_[stores_[g.index].unit_of_bucket[k]].gathered) shard_from_full(g.master, g.index, k);
  }
}

void Stage3::shard_from_full(at::Tensor& master, std::size_t group, std::size_t bucket) {
  GroupStore& store = stores_[group];
  const auto& b = store.layout.buckets()[bucket];
  const at::Tensor mine = store.full[bucket].narrow(0, b.chunk.offset, b.chunk.numel);
  master.narrow(0, b.shard_offset, b.chunk.numel).copy_(mine);
  if (swap_) {
    swap_->write(group, bucket, mine);
  } else if (!store.param_shard.is_same(master)) {
    store.param_shard.narrow(0, b.shard_offset, b.chunk.numel).copy_(mine);
  }
}

std::vector<int> Stage3::begin_user_gather(std::vector<GroupState>& groups, const std::vector<at::Tensor>& params) {
  std::vector<bool> wanted(units_.size(), params.empty());
  for (const auto& p : params) wanted[map_.owner_of(p.unsafeGetTensorImpl())] = true;
  std::vector<int> token;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!wanted[u]) continue;
    gather(static_cast<int>(u));
    ++units_[u].active;
    token.push_back(static_cast<int>(u));
  }
  return token;
}

void Stage3::end_user_gather(std::vector<GroupState>& groups, const std::vector<int>& token,
                             std::optional<int> modifier_rank) {
  if (modifier_rank) {
    for (int u : token) {
      for (const auto& [gi, bi] : units_[u].buckets) {
        ctx_.comm.broadcast(stores_[gi].full[bi], *modifier_rank).wait();
        shard_from_full(groups[gi].master, gi, bi);
      }
    }
  }
  for (int u : token) {
    --units_[u].active;
    release(u);
  }
}

std::vector<at::Tensor> Stage3::shard_chunks(const UnitState& u) {
  std::vector<at::Tensor> chunks;
  if (swap_) {
    std::vector<ParamSwap::Pending> reads;
    for (const auto& [gi, bi] : u.buckets) reads.push_back(swap_->start_read(gi, bi));
    for (ParamSwap::Pending r : reads) chunks.push_back(swap_->finish_read(r));
    return chunks;
  }
  for (const auto& [gi, bi] : u.buckets) {
    const auto& b = stores_[gi].layout.buckets()[bi];
    chunks.push_back(stores_[gi].param_shard.narrow(0, b.shard_offset, b.chunk.numel));
  }
  return chunks;
}

std::vector<comm::Work> Stage3::all_gather_into_full(const UnitState& u, const std::vector<at::Tensor>& chunks) {
  std::vector<comm::Work> works;
  for (size_t i = 0; i < u.buckets.size(); ++i) {
    const auto& [gi, bi] = u.buckets[i];
    works.push_back(ctx_.comm.all_gather(chunks[i], stores_[gi].full[bi]));
  }
  return works;
}

void Stage3::start_gather(int unit) {
  UnitState& u = units_[unit];
  if (u.gathered) return;
  for (const auto& [gi, bi] : u.buckets) allocate_storage(stores_[gi].full[bi]);
  if (swap_) {
    // The chunks come off the disk while the units before this one compute; the
    // all-gathers start when the unit is needed (finish_gather).
    for (const auto& [gi, bi] : u.buckets) u.reads.push_back(swap_->start_read(gi, bi));
  } else {
    u.inflight = all_gather_into_full(u, shard_chunks(u));
  }
  u.gathered = true;
  gathered_numel_ += u.numel;
  peak_gathered_numel_ = std::max(peak_gathered_numel_, gathered_numel_);
}

void Stage3::finish_gather(int unit) {
  UnitState& u = units_[unit];
  if (!u.reads.empty()) {
    for (ParamSwap::Pending r : u.reads) u.inputs.push_back(swap_->finish_read(r));
    u.reads.clear();
    u.inflight = all_gather_into_full(u, u.inputs);
  }
  if (u.inflight.empty()) return;
  std::vector<comm::Work> works = std::move(u.inflight);
  u.inflight.clear();
  comm::wait_all(works);
  u.inputs.clear();
}

void Stage3::gather(int unit) {
  start_gather(unit);
  finish_gather(unit);
}

void Stage3::release(int unit) {
  UnitState& u = units_[unit];
  if (unit == 0 || !u.gathered || u.active > 0) return;
  finish_gather(unit);   // no collective may still be writing into the memory
  for (const auto& [gi, bi] : u.buckets) free_storage(stores_[gi].full[bi]);
  u.gathered = false;
  gathered_numel_ -= u.numel;
}

void Stage3::pre_forward(int unit) {
  for (int v : map_.units[unit].uses) {
    gather(v);
    ++units_[v].active;
  }
  units_[unit].entered_at = c10::GradMode::is_enabled() ? follow_trace(unit) : kNoEvent;
}

void Stage3::post_forward(int unit) {
  const std::size_t event = std::exchange(units_[unit].entered_at, kNoEvent);
  for (int v : map_.units[unit].uses) {
    --units_[v].active;
    // Kept when its next use is near (stage3_max_reuse_distance) or a prefetch counted on it.
    if (units_[v].in_backward) continue;
    if (event == kNoEvent || !trace_.schedule.keep(event, v, gathered_numel_, trace_.wanted_at)) release(v);
  }
}

void Stage3::pre_backward(int unit) {
  for (int v : map_.units[unit].uses) {
    gather(v);
    units_[v].in_backward = units_[v].pending > 0;
  }
  follow_trace(unit);
}

std::size_t Stage3::follow_trace(int unit) {
  Trace& t = trace_;
  if (t.recording) {
    t.recorded.push_back(unit);
    return kNoEvent;
  }
  if (!t.valid) return kNoEvent;
  if (t.next >= t.recorded.size() || t.recorded[t.next] != unit) {
    // A data-dependent branch (or units called in another order): the recorded order no
    // longer says what comes next, so units are gathered on demand until the micro-step
    // ends, and the next one is recorded again, as DeepSpeed invalidates its trace.
    leave_trace();
    return kNoEvent;
  }
  const std::size_t event = t.next++;
  auto is_gathered = [this](int v) { return units_[v].gathered; };
  for (int v : t.schedule.prefetch(event, is_gathered, gathered_numel_, t.wanted_at)) start_gather(v);
  return event;
}

void Stage3::leave_trace() {
  trace_.valid = false;
  if (!trace_.warned && ctx_.comm.rank() == 0) {
    ZT_LOG_WARN("ZeRO stage 3: the units ran in another order than in the recorded micro-step (a data-dependent "
                "branch?); each is gathered when entered until the next micro-step records the order again "
                "(said once)");
  }
  trace_.warned = true;
}

// The micro-step's backward is over: a first (or re-)recording becomes the schedule; a
// step that left the trace, or stopped short of its end, records again.
void Stage3::end_trace_step() {
  Trace& t = trace_;
  if (t.recording) {
    std::vector<std::vector<int>> events;
    for (int u : t.recorded) events.push_back(map_.units[u].uses);
    std::vector<int64_t> numels;
    for (const UnitState& u : units_) numels.push_back(u.numel);
    t.schedule = UnitSchedule(std::move(events), std::move(numels), options_.schedule);
    t.recording = false;
  } else if (!t.valid || t.next != t.recorded.size()) {
    if (t.valid) leave_trace();   // it stopped short
    t.recorded.clear();
    t.recording = true;
    t.valid = true;
  }
  t.next = 0;
  t.wanted_at.assign(units_.size(), 0);
}

void Stage3::begin_backward() {
  for (UnitState& u : units_) u.pending = u.trainable;
}

void Stage3::gradient_done(std::size_t group, std::size_t param) {
  const int unit = stores_[group].unit_of_param[param];
  // All of the unit's gradients are in: its backward is over, so its full parameters go
  // (their gradients wait in the staging bucket for the reduce-scatter).
  if (--units_[unit].pending == 0) {
    units_[unit].in_backward = false;
    release(unit);
  }
}

void Stage3::on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) {
  Stage2::on_gradient(g, param, grad);
  gradient_done(g.index, param);
}

void Stage3::on_unused(GroupState& g, std::size_t param) {
  Stage2::on_unused(g, param);
  gradient_done(g.index, param);
}

void Stage3::end_backward() {
  // A unit gathered for a backward that brought none of its gradients (frozen, or used
  // without a gradient), or kept for a use that did not come, goes too.
  for (size_t u = 1; u < units_.size(); ++u) {
    units_[u].in_backward = false;
    release(static_cast<int>(u));
  }
  end_trace_step();
}

void Stage3::publish_weights(std::vector<GroupState>& groups) {
  // The master into the parameter shard (on disk with offload_param nvme), unless they are
  // one tensor (fp32) or optimizer offload wrote the new weights there already.
  for (GroupState& g : groups) {
    if (g.weights_in_place) continue;
    at::Tensor& shard = stores_[g.index].param_shard;
    if (swap_) {
      for (size_t k = 0; k < g.layout.buckets().size(); ++k) {
        const auto& b = g.layout.buckets()[k];
        swap_->write(g.index, k, g.master.narrow(0, b.shard_offset, b.chunk.numel).to(ctx_.dtypes.model));
      }
    } else if (!shard.is_same(g.master)) {
      shard.copy_(g.master);
    }
  }
  // The resident unit is gathered again now; the others when they are next used.
  const std::vector<at::Tensor> chunks = shard_chunks(units_[0]);
  std::vector<comm::Work> works = all_gather_into_full(units_[0], chunks);
  comm::wait_all(works);
}

std::vector<ShardPiece> Stage3::weight_pieces(GroupState& g) {
  const GroupStore& store = stores_[g.index];
  if (!swap_) return {{0, g.layout.shard_numel(), ctx_.dtypes.model, store.param_shard}};
  std::vector<ShardPiece> pieces;   // one per bucket, filled by the writer and stored to disk
  for (const auto& b : g.layout.buckets()) pieces.push_back({b.shard_offset, b.chunk.numel, ctx_.dtypes.model, {}});
  return pieces;
}

void Stage3::copy_shard_weights(GroupState& g, int64_t offset, const at::Tensor& out) {
  if (!swap_) return Stage::copy_shard_weights(g, offset, out);
  const int64_t end = offset + out.numel();
  for (size_t k = 0; k < g.layout.buckets().size(); ++k) {   // the chunks on disk, read one at a time
    const auto& b = g.layout.buckets()[k];
    const int64_t begin = std::max(offset, b.shard_offset), stop = std::min(end, b.shard_offset + b.chunk.numel);
    if (begin >= stop) continue;
    const at::Tensor chunk = swap_->finish_read(swap_->start_read(g.index, k));
    out.narrow(0, begin - offset, stop - begin).copy_(chunk.narrow(0, begin - b.shard_offset, stop - begin));
  }
}

void Stage3::store_weight_piece(GroupState& g, std::size_t piece, const at::Tensor& weights) {
  ZT_INTERNAL_ASSERT(swap_ != nullptr, "a stage-3 weight piece stored without parameter offload");
  swap_->write(g.index, piece, weights);
}

int64_t Stage3::param_nbytes(const GroupState& g) const {
  const GroupStore& store = stores_[g.index];
  int64_t resident = 0;
  for (size_t k = 0; k < store.unit_of_bucket.size(); ++k) {
    if (store.unit_of_bucket[k] == 0) resident += store.layout.buckets()[k].flat.numel;
  }
  const auto& d = ctx_.dtypes;
  const GroupPlan plan = plan_group(traits_, store.layout, {d.half(), d.accum == at::kFloat, d.accum == d.comm}, resident);
  // With offload_param nvme the shard is on disk: only the resident unit is in memory. In fp32
  // the plan counts the shard as the master; with optimizer offload the master is the store's
  // own copy, so the shard is a buffer of its own.
  int64_t numel = swap_ ? resident : plan.params_numel;
  if (!swap_ && !d.half() && ctx_.master_offloaded) numel += g.layout.shard_numel();
  return numel * static_cast<int64_t>(c10::elementSize(d.model));
}

}  // namespace zerotrain::stages::stage3
