// Evaluation, as HF's Trainer.evaluate: the eval set split across the ranks in order, each
// sample scored once (no padding duplicates, unlike a DistributedSampler), the sums
// all-reduced so that every rank returns the same eval_loss and eval_accuracy or
// eval_perplexity.
#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "zerotrain/core/error.h"
#include "zerotrain/data/loader.h"
#include "zerotrain/trainer/trainer_impl.h"
#include "zerotrain/trainer/training_plan.h"

namespace zerotrain {

Metrics Trainer::Impl::evaluate() {
  ZT_CHECK(data.eval != nullptr, UsageError, "evaluate: the Trainer has no evaluation dataset");
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = data.eval->size(), ws = world_size();
  // Rank r scores samples r, r + ws, ...; at ZeRO stage 3 a forward is collective (the units
  // gather their parameters), so every rank runs as many batches as the rank with the most,
  // a rank out of samples scoring one it then leaves out.
  std::vector<int64_t> mine;
  for (int64_t i = rank(); i < n; i += ws) mine.push_back(i);
  const int64_t most = trainer::ceil_div(n, ws), batch_size = args.per_device_eval_batch_size;
  const int64_t batches = trainer::ceil_div(most, batch_size);   // a batch size near 2^63 is 1 batch
  data::DataLoader loader(data.eval, mine,
                          {.batch_size = batch_size, .num_workers = static_cast<int>(args.dataloader_num_workers)});
  double loss_sum = 0, count = 0, correct = 0;
  engine->eval();
  {
    torch::NoGradGuard no_grad;
    for (int64_t b = 0; b < batches; ++b) {
      auto batch = loader.next();
      if (batch) {
        const auto sums = model->eval_sums(batch->inputs.to(device), batch->targets.to(device));
        loss_sum += sums.loss_sum;
        count += static_cast<double>(sums.count);
        correct += static_cast<double>(sums.correct);
      } else {
        const auto filler = data.eval->get({0});
        model->eval_sums(filler.inputs.to(device), filler.targets.to(device));
      }
    }
  }
  engine->train();
  auto totals = torch::tensor({loss_sum, count, correct}, torch::kDouble);
  comm->all_reduce(totals, comm::ReduceOp::kSum).wait();
  const double total_count = totals[1].item<double>();
  const double eval_loss = totals[0].item<double>() / std::max(total_count, 1.0);
  const double runtime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Metrics metrics{{"eval_loss", eval_loss}};
  switch (model->eval_metric()) {
    case models::EvalMetric::kAccuracy:
      metrics.emplace_back("eval_accuracy", totals[2].item<double>() / std::max(total_count, 1.0));
      break;
    case models::EvalMetric::kPerplexity:
      metrics.emplace_back("eval_perplexity", std::exp(eval_loss));
      break;
    case models::EvalMetric::kNone:
      break;
  }
  metrics.emplace_back("eval_runtime", runtime_s);
  metrics.emplace_back("eval_samples_per_second", static_cast<double>(n) / std::max(runtime_s, 1e-9));
  metrics.emplace_back("epoch", state.epoch);
  log->eval_log(state.global_step, metrics);
  state.log_history.emplace_back(state.global_step, metrics);
  each_callback([&](TrainerCallback& c) { c.on_evaluate(args, state, control, metrics); });
  return metrics;
}

}  // namespace zerotrain
