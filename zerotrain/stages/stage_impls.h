// The stages behind the Stage interface (stage.h); only stage_factory.cpp creates them.
#pragma once

#include "zerotrain/stages/stage.h"
#include "zerotrain/stages/staging_pool.h"

namespace zerotrain::stages {

class Stage0 final : public Stage {
 public:
  using Stage::Stage;
  void on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) override;
  PendingReduce reduce_bucket(GroupState& g, std::size_t bucket) override;
  std::vector<GradientPiece> gradient_pieces(const GroupState& g) const override;
  std::vector<int64_t> optimizer_segments(const GroupState& g) const override;
  void publish_weights(std::vector<GroupState>& groups) override;

 protected:
  void init_master(GroupState& g) override;
  void refresh_master(GroupState& g) override;
};

// Stages 1 and 2: the optimizer steps this rank's chunk of every bucket.
class ShardedStage : public Stage {
 public:
  using Stage::Stage;
  std::vector<GradientPiece> gradient_pieces(const GroupState& g) const override;
  std::vector<ShardPiece> weight_pieces(GroupState& g) override;
  void publish_weights(std::vector<GroupState>& groups) override;

 protected:
  void init_master(GroupState& g) override;
  void refresh_master(GroupState& g) override;
};

class Stage1 final : public ShardedStage {
 public:
  using ShardedStage::ShardedStage;
  void on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) override;
  PendingReduce reduce_bucket(GroupState& g, std::size_t bucket) override;
};

class Stage2 : public ShardedStage {
 public:
  Stage2(config::StageTraits traits, StageContext context);
  void on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) override;
  void on_unused(GroupState& g, std::size_t param) override;
  PendingReduce reduce_bucket(GroupState& g, std::size_t bucket) override;

 protected:
  at::Tensor& staging_for(GroupState& g, std::size_t bucket);

 private:
  at::Tensor staged_range(GroupState& g, std::size_t param);
  StagingPool pool_;
};

}  // namespace zerotrain::stages
