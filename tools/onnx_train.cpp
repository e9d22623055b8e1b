// onnx-train: fine-tunes an ONNX model with Onyx's autodiff and writes the
// trained model as ONNX again. The graph is rebuilt per batch (dynamic
// graphs); the model's float initializers are the trainable params, and
// BatchNormalization trains with batch statistics while its running
// statistics are updated. Checkpoints (params, optimizer state, step, RNGs,
// position in the epoch) are written atomically; --resume continues so that
// an interrupted run ends with the same params as an uninterrupted one.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>

#include <CLI/CLI.hpp>

#include <onyx/onyx.h>

#include "tool_common.h"

using namespace onyx;

namespace {

struct Data {
  std::map<std::string, Tensor> arrays;
  int64_t n = 0;
};

Data loadData(const std::string& path, const std::vector<std::string>& keys) {
  Data d;
  std::map<std::string, Tensor> all;
  for(auto& kv : io::loadNpz(path)) all[kv.first] = kv.second;
  for(const auto& k : keys) {
    auto it = all.find(k);
    if(it == all.end()) {
      std::string have;
      for(auto& kv : all) have += (have.empty() ? "" : ", ") + kv.first;
      throw Error(str(path, ": no array '", k, "' (it holds: ", have, ")"));
    }
    const Tensor& t = it->second;
    if(t->shape().rank() == 0) throw Error(str(path, ": array '", k, "' is a scalar; samples go along axis 0"));
    int64_t n = t->shape().dims()[0];
    if(d.n && n != d.n) throw Error(str(path, ": array '", k, "' has ", n, " samples, others ", d.n));
    d.n = n;
    d.arrays[k] = t;
  }
  if(d.n == 0) throw Error(str(path, ": no samples"));
  return d;
}

// Rows `idx` of t (samples along axis 0).
Tensor rows(const Tensor& t, const std::vector<int64_t>& idx) {
  std::vector<int64_t> dims = t->shape().vec();
  size_t rowBytes = t->bytes() / static_cast<size_t>(dims[0]);
  dims[0] = static_cast<int64_t>(idx.size());
  Tensor r = TensorBase::create(Shape(dims), t->type());
  for(size_t i = 0; i < idx.size(); ++i)
    std::memcpy(static_cast<char*>(r->raw()) + i * rowBytes,
                static_cast<const char*>(t->raw()) + static_cast<size_t>(idx[i]) * rowBytes, rowBytes);
  return r;
}

Tensor convert(const Tensor& t, Type to) {
  std::vector<double> v;
  t->get(v);
  Tensor r = TensorBase::create(t->shape(), to);
  for(size_t i = 0; i < v.size(); ++i) storeFromDouble(r->raw(), to, i, v[i]);
  return r;
}

double scalarOf(const Tensor& t) {
  std::vector<double> v;
  t->get(v);
  return v.at(0);
}

struct Options {
  std::string model, data, valid, target, output, loss = "ce", optimizer = "adam", out, decay = "constant";
  std::string checkpointDir, stepLog, dumpGradients, device = "cpu";
  std::vector<std::string> inputs, freeze;
  double lr = 1e-3, clip = 0, weightDecay = 0, momentum = 0, minLr = 0;
  int epochs = 1, warmup = 0;
  int64_t batch = 32, checkpointEvery = 100, accumulate = 1;
  uint64_t seed = 1;
  bool resume = false, noShuffle = false;
};

std::string hexDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string rngText(const std::mt19937_64& r) {
  std::ostringstream os;
  os << r;
  return os.str();
}

// The settings a resumed run must share with the run that wrote the
// checkpoint (anything else would not continue the same training).
std::map<std::string, std::string> runSettings(const Options& o) {
  std::ostringstream lr;
  lr << std::setprecision(17) << o.lr;
  return {{"optimizer", o.optimizer}, {"loss", o.loss},       {"batch_size", std::to_string(o.batch)},
          {"lr", lr.str()},           {"seed", std::to_string(o.seed)}, {"shuffle", o.noShuffle ? "no" : "yes"},
          {"accumulate", std::to_string(o.accumulate)}};
}

// Temporary files left by a run killed while writing (name.tmp.<pid>).
void removeStaleTemps(const std::string& dir, const std::string& file) {
  std::error_code ec;
  for(auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if(n.rfind(file + ".tmp.", 0) == 0) {
      std::filesystem::remove(e.path(), ec);
      std::cerr << "onnx-train: removed " << e.path().string() << " (left by an interrupted write)\n";
    }
  }
}

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
    if(o.epochs < 1) throw Error("--epochs must be at least 1");
    if(o.batch < 1) throw Error("--batch-size must be at least 1");
    if(o.checkpointEvery < 1) throw Error("--checkpoint-every must be at least 1");
    if(o.accumulate < 1) throw Error("--accumulate must be at least 1");
    if(o.resume && o.checkpointDir.empty()) throw Error("--resume needs --checkpoint-dir");
    if(o.out.empty() && o.dumpGradients.empty()) throw Error("-o TUNED.onnx is required");
    auto model = Model::load(o.model);
    bool hasOutput = false;
    for(auto& out : model->outputs()) hasOutput = hasOutput || out.name == o.output;
    if(!hasOutput) throw Error(str(o.model, ": the model has no output '", o.output, "'"));
    std::map<std::string, std::string> feeds;  // input name -> data key
    std::map<std::string, Type> feedTypes;     // input name -> declared element type
    std::vector<std::string> keys{o.target};
    for(const auto& spec : o.inputs) {
      size_t eq = spec.find('=');
      if(eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw Error(str("--input '", spec, "': expected NAME=KEY"));
      std::string name = spec.substr(0, eq);
      const ValueInfo* info = nullptr;
      for(auto& i : model->inputs())
        if(i.name == name) info = &i;
      if(!info) throw Error(str("--input '", spec, "': the model has no input '", name, "'"));
      feeds[name] = spec.substr(eq + 1);
      feedTypes[name] = info->type;
      keys.push_back(spec.substr(eq + 1));
    }
    Data train = loadData(o.data, keys);
    Data valid;
    if(!o.valid.empty()) valid = loadData(o.valid, keys);
    // Float data of another width than the model's input (numpy's float64
    // default, say) is converted; anything else must match.
    for(Data* d : {&train, &valid})
      for(auto& kv : feeds) {
        if(!d->n) continue;
        Tensor& t = d->arrays[kv.second];
        Type want = feedTypes[kv.first];
        if(want != Type::undefined && t->type() != want && isFloat(t->type()) && isFloat(want))
          t = convert(t, want);
      }

    OptimizerOptions oo;
    oo.lr = o.lr;
    oo.momentum = o.momentum;
    oo.weightDecay = o.weightDecay;
    oo.clipNorm = o.clip;
    Ptr<OptimizerBase> opt;
    if(o.optimizer == "sgd") opt = Optimizer<Sgd>(oo);
    else if(o.optimizer == "adagrad") opt = Optimizer<Adagrad>(oo);
    else if(o.optimizer == "adam") opt = Optimizer<Adam>(oo);
    else if(o.optimizer == "adamw") opt = Optimizer<AdamW>(oo);
    else throw Error(str("--optimizer '", o.optimizer, "': expected sgd, adagrad, adam or adamw"));
    if(o.loss != "ce" && o.loss != "mse" && o.loss != "l1" && o.loss != "bce")
      throw Error(str("--loss '", o.loss, "': expected ce, mse, l1 or bce"));
    const int64_t stepSamples = o.batch * o.accumulate;  // samples per optimizer step
    int64_t stepsPerEpoch = (train.n + stepSamples - 1) / stepSamples;
    LrSchedule schedule(o.lr, static_cast<size_t>(o.warmup), LrSchedule::parseDecay(o.decay),
                        static_cast<size_t>(stepsPerEpoch * o.epochs), o.minLr);

    auto graph = New<ExpressionGraph>();
    graph->setDevice(parseDevice(o.device));
    graph->setSeed(o.seed);
    std::mt19937_64 order(o.seed);
    bool frozen = false, labelsChecked = false;
    ImportedGraph last;
    // Builds the graph for one batch, with the loss attached to the output.
    auto build = [&](const Data& d, const std::vector<int64_t>& idx, bool trainStep, Expr& out) {
      graph->clear();
      graph->setInference(!trainStep);
      HostValues in;
      for(auto& kv : feeds) in[kv.first] = HostValue::of(rows(d.arrays.at(kv.second), idx));
      last = importGraph(*model, *graph, in, true);
      if(!frozen) {
        size_t n = freezeParams(*graph, o.freeze);
        for(const auto& p : o.freeze)
          if(freezeParams(*graph, {p}) == 0) throw Error(str("--freeze '", p, "' matches no param"));
        if(!o.freeze.empty()) std::cerr << "onnx-train: froze " << n << " params\n";
        frozen = true;
      }
      out = nullptr;
      for(auto& kv : last.spec.outputs)
        if(kv.first == o.output) out = kv.second;
      if(!out) throw Error(str("output '", o.output, "' is not a tensor output"));
      Tensor target = rows(d.arrays.at(o.target), idx);
      if(o.loss == "ce") {
        if(!isInt(target->type())) throw Error(str("--loss ce takes integer labels; '", o.target, "' is ", typeName(target->type())));
        if(!labelsChecked) {  // every label of both files, by its sample index
          int64_t classes = out->shape().dims()[out->shape().rank() - 1];
          for(const auto& f : {std::make_pair(&train, &o.data), std::make_pair(&valid, &o.valid)}) {
            if(!f.first->n) continue;
            try {
              checkLabels(*f.first->arrays.at(o.target), classes);
            } catch(const Error& e) {
              throw Error(str(*f.second, ": '", o.target, "': ", e.what()));
            }
          }
          labelsChecked = true;
        }
      } else if(target->type() != out->value_type()) {
        target = convert(target, out->value_type());
      }
      if(target->getDeviceId() != graph->getDeviceId()) {  // the batch's targets, to the graph's device
        Tensor dev = TensorBase::create(target->shape(), target->type(), graph->getDeviceId());
        dev->copyFrom(*target);
        target = dev;
      }
      Expr t = graph->constant(target);
      try {
        return o.loss == "ce" ? crossEntropyLoss(out, t) : o.loss == "mse" ? mseLoss(out, t)
             : o.loss == "l1" ? l1Loss(out, t) : bceLoss(out, t);
      } catch(const Error& e) {
        throw Error(str("--loss ", o.loss, " on output '", o.output, "' (", out->shape(), "): ", e.what()));
      }
    };
    // One batch through the model; returns (loss, correct predictions). For
    // training, also the gradients (unless the loss is not finite).
    auto runBatch = [&](const Data& d, const std::vector<int64_t>& idx, bool trainStep) {
      Expr out;
      Expr loss = build(d, idx, trainStep, out);
      loss->keepValue();
      out->keepValue();
      graph->forward();
      double l = scalarOf(loss->val());
      int64_t correct = 0;
      if(o.loss == "ce") {
        std::vector<double> logits, labels;
        out->val()->get(logits);
        rows(d.arrays.at(o.target), idx)->get(labels);
        size_t classes = static_cast<size_t>(out->shape().dims()[out->shape().rank() - 1]);
        for(size_t i = 0; i < labels.size(); ++i) {
          auto b = logits.begin() + static_cast<std::ptrdiff_t>(i * classes);
          correct += std::max_element(b, b + static_cast<std::ptrdiff_t>(classes)) - b == static_cast<std::ptrdiff_t>(labels[i]);
        }
      }
      if(trainStep && std::isfinite(l)) {  // the update is the caller's (after accumulation)
        graph->backward(loss);
        applyStateUpdates(last);
      }
      return std::make_pair(l, correct);
    };
    auto firstRows = [](const Data& d, int64_t n) {
      std::vector<int64_t> idx(static_cast<size_t>(std::min(d.n, n)));
      std::iota(idx.begin(), idx.end(), 0);
      return idx;
    };

    // --dump-gradients: the loss and gradients on the first batch, for
    // comparing with another framework.
    if(!o.dumpGradients.empty()) {
      Expr out;
      Expr loss = build(train, firstRows(train, o.batch), true, out);
      loss->keepValue();
      graph->forward();
      graph->backward(loss);
      std::vector<std::pair<std::string, Tensor>> arrays{{"loss", loss->val()}};
      for(Expr p : *graph->params())
        if(p->trainable() && p->grad()) arrays.emplace_back("grad/" + p->name(), p->grad());
      for(const auto& [state, next] : last.stateUpdates) arrays.emplace_back("state/" + state->name(), next->val());
      io::saveNpz(o.dumpGradients, arrays);
      std::cout << o.dumpGradients << ": loss " << scalarOf(loss->val()) << ", " << arrays.size() - 1 << " arrays\n";
      return 0;
    }

    // Checkpoints: one file, replaced atomically.
    std::string ckpt;
    TrainState state;
    state.epoch = 1;
    std::string orderAtEpochStart = rngText(order);
    double epochSum = 0;
    int64_t epochSeen = 0;
    if(!o.checkpointDir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(o.checkpointDir, ec);
      if(ec) throw Error(str("--checkpoint-dir '", o.checkpointDir, "': ", ec.message()));
      ckpt = (std::filesystem::path(o.checkpointDir) / "checkpoint.npz").string();
      removeStaleTemps(o.checkpointDir, "checkpoint.npz");
      if(o.resume && std::filesystem::exists(ckpt)) {
        Expr out;
        build(train, firstRows(train, o.batch), true, out);  // creates every param
        state = loadCheckpoint(ckpt, *graph, *opt);
        for(auto& [k, v] : runSettings(o)) {
          auto it = state.extra.find(k);
          if(it != state.extra.end() && it->second != v)
            throw Error(str(ckpt, ": written with ", k, " ", it->second, ", this run has ", v,
                            "; resume with the same settings or start a new --checkpoint-dir"));
        }
        std::istringstream(state.extra.at("order_rng")) >> order;
        orderAtEpochStart = state.extra.at("order_rng");
        std::sscanf(state.extra.at("epoch_loss_sum").c_str(), "%la", &epochSum);
        epochSeen = std::stoll(state.extra.at("epoch_seen"));
        std::cout << "resumed from " << ckpt << " at step " << state.step << " (epoch " << state.epoch << ", sample "
                  << state.sampleOffset << ")\n";
      } else if(o.resume) {
        std::cerr << "onnx-train: no checkpoint in " << o.checkpointDir << " yet; starting from the model\n";
      }
    }
    size_t step = state.step;
    uint64_t savedStep = step;
    auto save = [&](uint64_t epoch, uint64_t offset) {
      TrainState s;
      s.step = step;
      s.epoch = epoch;
      s.sampleOffset = offset;
      s.extra = runSettings(o);
      s.extra["order_rng"] = orderAtEpochStart;
      s.extra["epoch_loss_sum"] = hexDouble(epochSum);
      s.extra["epoch_seen"] = std::to_string(epochSeen);
      saveCheckpoint(ckpt, *graph, *opt, s);
      savedStep = step;
    };
    std::ofstream stepLog;
    if(!o.stepLog.empty()) {
      std::string kept;  // on resume, the lines of the steps the checkpoint holds
      if(state.step) {
        std::ifstream in(o.stepLog);
        for(std::string line; std::getline(in, line);)
          if(std::stoull(line) <= state.step) kept += line + "\n";
      }
      stepLog.open(o.stepLog, std::ios::trunc);
      stepLog << kept;
      if(!stepLog) throw Error(str("--step-log '", o.stepLog, "': cannot open for writing"));
      stepLog << std::setprecision(9);
    }

    bool tty = isatty(STDOUT_FILENO);
    for(int epoch = static_cast<int>(state.epoch); epoch <= o.epochs; ++epoch) {
      bool resumedEpoch = epoch == static_cast<int>(state.epoch) && state.sampleOffset > 0;
      if(!resumedEpoch) {
        orderAtEpochStart = rngText(order);
        epochSum = 0;
        epochSeen = 0;
      } else {
        std::istringstream(orderAtEpochStart) >> order;  // the order of the epoch being resumed
      }
      std::vector<int64_t> perm(static_cast<size_t>(train.n));
      std::iota(perm.begin(), perm.end(), 0);
      if(!o.noShuffle) std::shuffle(perm.begin(), perm.end(), order);
      auto t0 = std::chrono::steady_clock::now();
      int64_t startSeen = epochSeen;
      GradAccumulator acc;
      for(int64_t s0 = resumedEpoch ? static_cast<int64_t>(state.sampleOffset) : 0; s0 < train.n; s0 += stepSamples) {
        const int64_t s1 = std::min(train.n, s0 + stepSamples);
        double lr = schedule.lr(step);
        opt->setLearningRate(lr);
        double l = 0;
        for(int64_t b = s0; b < s1; b += o.batch) {  // the step's micro-batches
          std::vector<int64_t> idx(perm.begin() + b, perm.begin() + std::min(s1, b + o.batch));
          double lb = runBatch(train, idx, true).first;
          if(!std::isfinite(lb)) {
            std::string kept = ckpt.empty() ? "" : savedStep ? str("; the last good checkpoint is ", ckpt, " (step ", savedStep, ")")
                                                            : str("; no checkpoint was written yet");
            throw Error(str("the loss is ", lb, " at step ", step + 1, " (epoch ", epoch, "); stopped before updating",
                            kept));
          }
          double share = double(idx.size()) / double(s1 - s0);
          if(o.accumulate > 1) acc.add(*graph, share);
          l += lb * share;
        }
        if(o.accumulate > 1) acc.apply(*graph);
        opt->update(*graph);
        ++step;
        if(stepLog.is_open()) stepLog << step << " " << epoch << " " << l << " " << lr << "\n" << std::flush;
        epochSum += l * static_cast<double>(s1 - s0);
        epochSeen += s1 - s0;
        if(!ckpt.empty() && step % static_cast<uint64_t>(o.checkpointEvery) == 0 && s1 < train.n)
          save(static_cast<uint64_t>(epoch), static_cast<uint64_t>(s1));
        if(tty) {
          double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          int64_t done = s1;
          int filled = static_cast<int>(24 * done / train.n);
          std::cout << "\repoch " << epoch << "/" << o.epochs << " [" << std::string(static_cast<size_t>(filled), '=')
                    << std::string(static_cast<size_t>(24 - filled), ' ') << "] " << done << "/" << train.n << " loss "
                    << epochSum / double(epochSeen) << ", "
                    << int(double(epochSeen - startSeen) / std::max(secs, 1e-9)) << " samples/s" << std::flush;
        }
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if(tty) std::cout << "\r\033[K";
      std::cout << "epoch " << epoch << ": train loss " << epochSum / double(epochSeen) << " ("
                << int(double(epochSeen - startSeen) / std::max(secs, 1e-9)) << " samples/s)";
      if(valid.n) {
        double vs = 0;
        int64_t correct = 0;
        for(int64_t b = 0; b < valid.n; b += o.batch) {
          std::vector<int64_t> idx;
          for(int64_t i = b; i < std::min(valid.n, b + o.batch); ++i) idx.push_back(i);
          auto r = runBatch(valid, idx, false);
          vs += r.first * double(idx.size());
          correct += r.second;
        }
        std::cout << ", valid loss " << vs / double(valid.n);
        if(o.loss == "ce") std::cout << ", valid accuracy " << double(correct) / double(valid.n);
      }
      std::cout << "\n" << std::flush;
      if(!ckpt.empty()) {
        orderAtEpochStart = rngText(order);
        epochSum = 0;
        epochSeen = 0;
        save(static_cast<uint64_t>(epoch + 1), 0);
      }
    }

    // The trained model: an inference graph (running statistics, no dropout)
    // with the params as initializers.
    Expr out;
    build(train, firstRows(train, o.batch), false, out);
    ExportResult r = exportOnnx(last.spec);
    checkOnnxModel(r.model, o.out);
    writeOnnxModel(o.out, r);
    std::cout << o.out << ": opset " << r.opset << ", " << r.initializers << " initializers, " << step << " steps\n";
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-train: " << e.what() << "\n";
    return 1;
  }
}
