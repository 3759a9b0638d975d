// The Trainer from C++ (docs/trainer.md): the ConvNet on Fashion-MNIST with the DeepSpeed
// config given, evaluated after each epoch, stopped early when the evaluation loss stalls.
//
//   build/examples/trainer_fashion_mnist examples/ds_config_fashion_zero2.json [train samples]
//   build/tools/zerotrain launch --nproc_per_node 2 -- build/examples/trainer_fashion_mnist ...
// Built in the tree, and as a project of its own against an installed zerotrain
// (examples/CMakeLists.txt).
#include <iostream>
#include <memory>
#include <string>

#include <zerotrain/zerotrain.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " DS_CONFIG [TRAIN_SAMPLES]\n";
    return 2;
  }
  const int64_t limit = argc > 2 ? std::stoll(argv[2]) : 0;   // 0: all 60,000
  auto train = zerotrain::data::open_dataset("fashion-mnist", zerotrain::data::Split::kTrain, {.limit = limit});
  auto test = zerotrain::data::open_dataset("fashion-mnist", zerotrain::data::Split::kEval);
  const auto& info = train->info();
  const zerotrain::models::DataShape shape{.kind = zerotrain::models::DataShape::Kind::kImages,
                                           .channels = info.channels,
                                           .height = info.height,
                                           .width = info.width,
                                           .classes = info.classes,
                                           .name = "fashion-mnist"};

  zerotrain::TrainingArguments args;
  args.deepspeed = argv[1];
  args.per_device_train_batch_size = 32;
  args.learning_rate = 2e-3;
  args.num_train_epochs = 2;
  args.eval_strategy = zerotrain::IntervalStrategy::kEpoch;
  args.save_strategy = zerotrain::IntervalStrategy::kNo;
  args.logging_steps = 200;

  zerotrain::Trainer trainer(args, {.build = [&] { return zerotrain::models::make_model("convnet", "", shape); }},
                             {.train = train, .eval = test});
  trainer.add_callback(std::make_shared<zerotrain::EarlyStoppingCallback>(/*patience=*/2));
  const zerotrain::TrainOutput out = trainer.train();
  const zerotrain::Metrics metrics = trainer.evaluate();
  if (trainer.is_world_process_zero()) {
    std::cout << "trained " << out.global_step << " steps; test accuracy "
              << zerotrain::find_metric(metrics, "eval_accuracy").value_or(0) << "\n";
  }
  return 0;
}
