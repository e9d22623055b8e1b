// onnx-train: fine-tunes an ONNX model with Onyx's autodiff and writes the
// trained model as ONNX again. The loop is onyx::Trainer (train/trainer.h):
// this file parses the command line, loads the .npz data, maps the flags
// onto TrainerOptions and prints what the Trainer reports (a progress bar on
// a terminal, a line per epoch, the --step-log file).
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#include <CLI/CLI.hpp>

#include <onyx/onyx.h>

#include "tool_common.h"

using namespace onyx;

namespace {

struct Options {
  std::string model, data, valid, target, output, loss = "ce", optimizer = "adam", out, decay = "constant";
  std::string checkpointDir, stepLog, dumpGradients, device = "cpu", precision = "float32";
  std::vector<std::string> inputs, freeze;
  double lr = 1e-3, clip = 0, weightDecay = 0, momentum = 0, minLr = 0;
  int epochs = 1, warmup = 0, threads = 0;
  int64_t batch = 32, checkpointEvery = 100, accumulate = 1;
  uint64_t seed = 1;
  bool resume = false, noShuffle = false;
};

// The flags onto the Trainer's options (the inputs come from --input specs,
// parsed against the model in main()).
TrainerOptions trainerOptions(const Options& o) {
  TrainerOptions t;
  t.target = o.target;
  t.output = o.output;
  t.loss = o.loss;
  t.optimizer = o.optimizer;
  t.lr = o.lr;
  t.momentum = o.momentum;
  t.weightDecay = o.weightDecay;
  t.clipNorm = o.clip;
  t.warmup = static_cast<size_t>(o.warmup);
  t.decay = o.decay;
  t.minLr = o.minLr;
  t.epochs = o.epochs;
  t.batchSize = o.batch;
  t.accumulate = o.accumulate;
  t.shuffle = !o.noShuffle;
  t.seed = o.seed;
  t.freeze = o.freeze;
  t.device = o.device;
  t.precision = o.precision;
  t.threads = o.threads;
  t.checkpointDir = o.checkpointDir;
  t.checkpointEvery = o.checkpointEvery;
  t.resume = o.resume;
  return t;
}

// What the Trainer reports, as onnx-train shows it: remarks on stderr, a
// progress bar on a terminal, a line per epoch, the --step-log file.
struct Console {
  explicit Console(const Options& options) : o(options) {}
  const Options& o;
  bool tty = isatty(STDOUT_FILENO);
  std::ofstream stepLog;

  TrainerCallbacks callbacks() {
    TrainerCallbacks cb;
    cb.optionName = [](const std::string& field) {
      static const std::map<std::string, std::string> flags{
          {"epochs", "--epochs"},         {"batchSize", "--batch-size"}, {"checkpointEvery", "--checkpoint-every"},
          {"accumulate", "--accumulate"}, {"resume", "--resume"},        {"checkpointDir", "--checkpoint-dir"},
          {"inputs", "--input"},          {"optimizer", "--optimizer"},  {"loss", "--loss"},
          {"freeze", "--freeze"},         {"precision", "--precision"},  {"threads", "--threads"}};
      auto it = flags.find(field);
      return it == flags.end() ? field : it->second;
    };
    cb.notice = [](const std::string& msg) { std::cerr << "onnx-train: " << msg << "\n"; };
    cb.resumed = [](const std::string& path, const TrainState& s) {
      std::cout << "resumed from " << path << " at step " << s.step << " (epoch " << s.epoch << ", sample "
                << s.sampleOffset << ")\n";
    };
    cb.started = [this](const TrainState& s) { openStepLog(s.step); };
    cb.step = [this](const StepInfo& s) {
      if(stepLog.is_open()) stepLog << s.step << " " << s.epoch << " " << s.loss << " " << s.lr << "\n" << std::flush;
      if(tty) {
        int filled = static_cast<int>(24 * s.epochDone / s.epochSize);
        std::cout << "\repoch " << s.epoch << "/" << o.epochs << " [" << std::string(static_cast<size_t>(filled), '=')
                  << std::string(static_cast<size_t>(24 - filled), ' ') << "] " << s.epochDone << "/" << s.epochSize
                  << " loss " << s.epochLoss << ", " << samplesPerSecond(s.trainedNow, s.seconds) << " samples/s"
                  << std::flush;
      }
    };
    cb.epochTrained = [this](const EpochInfo& e) {
      if(tty) std::cout << "\r\033[K";
      std::cout << "epoch " << e.epoch << ": train loss " << e.trainLoss << " ("
                << samplesPerSecond(e.trainedNow, e.seconds) << " samples/s)";
    };
    cb.epochEnd = [this](const EpochInfo& e) {
      if(e.validated) {
        std::cout << ", valid loss " << e.valid.loss;
        if(o.loss == "ce") std::cout << ", valid accuracy " << e.valid.accuracy;
      }
      std::cout << "\n" << std::flush;
    };
    return cb;
  }

  static int samplesPerSecond(int64_t samples, double secs) { return int(double(samples) / std::max(secs, 1e-9)); }

  // On resume, keeps the lines of the steps the checkpoint holds.
  void openStepLog(uint64_t resumedStep) {
    if(o.stepLog.empty()) return;
    std::string kept;
    if(resumedStep) {
      std::ifstream in(o.stepLog);
      for(std::string line; std::getline(in, line);)
        if(std::stoull(line) <= resumedStep) kept += line + "\n";
    }
    stepLog.open(o.stepLog, std::ios::trunc);
    stepLog << kept;
    if(!stepLog) throw Error(str("--step-log '", o.stepLog, "': cannot open for writing"));
    stepLog << std::setprecision(9);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fine-tunes an ONNX model with Onyx and writes the trained model as ONNX.\n\n"
               "Examples:\n"
               "  onnx-train model.onnx --data train.npz --input x=x --target y --output logits --loss ce -o tuned.onnx\n"
               "  onnx-train model.onnx --data train.npz --valid valid.npz --input x=x --target y --output probs \\\n"
               "      --loss mse --optimizer sgd --momentum 0.9 --lr 0.05 --epochs 5 --batch-size 16 -o tuned.onnx\n"
               "  onnx-train bert.onnx --data d.npz --input ids=ids --target label --output logits --freeze 'embed*' \\\n"
               "      --checkpoint-dir ckpt --resume -o tuned.onnx\n"};
  Options o;
  app.add_option("model", o.model, "the .onnx model")->required();
  app.add_option("--data", o.data, "training data (.npz; samples along axis 0 of every array)")->required();
  app.add_option("--valid", o.valid, "validation data (.npz with the same keys): loss (and accuracy) per epoch");
  app.add_option("--input", o.inputs, "NAME=KEY: feed model input NAME from array KEY (repeatable)")->required();
  app.add_option("--target", o.target, "the array KEY holding the targets")->required();
  app.add_option("--output", o.output, "the model output the loss is attached to")->required();
  app.add_option("--loss", o.loss, "ce (integer labels on logits), mse, l1, bce (probabilities)")->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd, adagrad, adam, adamw")->capture_default_str();
  app.add_option("--lr", o.lr, "learning rate")->capture_default_str();
  app.add_option("--momentum", o.momentum, "sgd momentum")->capture_default_str();
  app.add_option("--weight-decay", o.weightDecay, "weight decay (decoupled for adamw)")->capture_default_str();
  app.add_option("--clip-norm", o.clip, "clip the global gradient norm to this (0: off)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "steps of linear learning-rate warmup")->capture_default_str();
  app.add_option("--decay", o.decay, "constant, linear or cosine decay after warmup")->capture_default_str();
  app.add_option("--min-lr", o.minLr, "the learning rate reached at the end of the decay")->capture_default_str();
  app.add_option("--epochs", o.epochs, "passes over the data")->capture_default_str();
  app.add_option("--batch-size", o.batch, "samples per step")->capture_default_str();
  app.add_option("--accumulate", o.accumulate,
                 "micro-batches of --batch-size per optimizer step (gradient accumulation)")
      ->capture_default_str();
  app.add_option("--freeze", o.freeze, "params matching this glob stay fixed (repeatable)");
  app.add_option("--seed", o.seed, "data order and random ops")->capture_default_str();
  app.add_option("--device", o.device, "cpu or gpu0: where the graph, params and optimizer state live")
      ->capture_default_str();
  tools::addPrecisionOption(app, o.precision);
  app.add_option("--threads", o.threads, "CPU threads (0: default)")->capture_default_str();
  app.add_flag("--no-shuffle", o.noShuffle, "take the samples in file order every epoch");
  app.add_option("--checkpoint-dir", o.checkpointDir, "write DIR/checkpoint.npz (atomically) as training goes");
  app.add_option("--checkpoint-every", o.checkpointEvery, "steps between checkpoints (and one per epoch)")
      ->capture_default_str();
  app.add_flag("--resume", o.resume, "continue from DIR/checkpoint.npz when it exists");
  app.add_option("--step-log", o.stepLog, "write 'step epoch loss lr' per training step to this file");
  app.add_option("--dump-gradients", o.dumpGradients,
                 "write the loss and every trainable param's gradient on the first batch (file order) to this .npz, "
                 "and stop");
  app.add_option("-o,--out", o.out, "the trained .onnx to write");
  CLI11_PARSE(app, argc, argv);

  try {
    TrainerOptions to = trainerOptions(o);
    Console console(o);
    TrainerCallbacks cb = console.callbacks();
    Trainer::checkOptions(to, cb);
    if(o.out.empty() && o.dumpGradients.empty()) throw Error("-o TUNED.onnx is required");
    // The output and the --input specs are checked here, before the data is
    // loaded, so that errors come in the order they always did (the Trainer
    // checks them again for its other callers).
    auto model = Model::load(o.model);
    bool hasOutput = false;
    for(auto& out : model->outputs()) hasOutput = hasOutput || out.name == o.output;
    if(!hasOutput) throw Error(str(o.model, ": the model has no output '", o.output, "'"));
    std::vector<std::string> keys{o.target};  // the arrays to load, in the order their absence is reported
    for(const auto& spec : o.inputs) {
      size_t eq = spec.find('=');
      if(eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw Error(str("--input '", spec, "': expected NAME=KEY"));
      std::string name = spec.substr(0, eq);
      bool known = false;
      for(auto& i : model->inputs()) known = known || i.name == name;
      if(!known) throw Error(str("--input '", spec, "': the model has no input '", name, "'"));
      to.inputs[name] = spec.substr(eq + 1);
      keys.push_back(spec.substr(eq + 1));
    }
    Dataset train = Dataset::loadNpz(o.data, keys);
    Dataset valid;
    if(!o.valid.empty()) valid = Dataset::loadNpz(o.valid, keys);
    // Where the decay ends, known now: a schedule that cannot be is reported
    // before the device is opened.
    to.totalSteps = Trainer::stepsPerEpoch(train.size(), to) * static_cast<size_t>(o.epochs);
    Trainer trainer(model, to, cb);
    trainer.setData(train, valid);

    // --dump-gradients: the loss and gradients on the first batch, for
    // comparing with another framework.
    if(!o.dumpGradients.empty()) {
      double loss = trainer.computeGradients(train.range(0, o.batch));
      std::vector<std::pair<std::string, Tensor>> arrays{{"loss", trainer.lossValue()}};
      for(auto& [name, grad] : trainer.gradients()) arrays.emplace_back("grad/" + name, grad);
      for(auto& [name, next] : trainer.stateUpdates()) arrays.emplace_back("state/" + name, next);
      io::saveNpz(o.dumpGradients, arrays);
      std::cout << o.dumpGradients << ": loss " << loss << ", " << arrays.size() - 1 << " arrays\n";
      return 0;
    }

    trainer.run();
    ExportResult r = trainer.exportModel(o.out);
    std::cout << o.out << ": opset " << r.opset << ", " << r.initializers << " initializers, " << trainer.steps()
              << " steps\n";
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-train: " << e.what() << "\n";
    return 1;
  }
}
