// onnx-train: fine-tunes an ONNX model with Onyx's autodiff and writes the
// trained model as ONNX again. The graph is rebuilt per batch (dynamic
// graphs); the model's float initializers are the trainable params.
//
// First version: losses, optimizers, LR schedule, freezing, gradient
// clipping, validation and the atomic export. Checkpoints and --resume are
// still to come (issue 5).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>

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
  std::vector<std::string> inputs, freeze;
  double lr = 1e-3, clip = 0, weightDecay = 0, momentum = 0, minLr = 0;
  int epochs = 1, warmup = 0;
  int64_t batch = 32;
  uint64_t seed = 1;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fine-tunes an ONNX model with Onyx and writes the trained model as ONNX.\n\n"
               "Examples:\n"
               "  onnx-train model.onnx --data train.npz --input x=x --target y --output logits --loss ce -o tuned.onnx\n"
               "  onnx-train model.onnx --data train.npz --valid valid.npz --input x=x --target y --output probs \\\n"
               "      --loss mse --optimizer sgd --momentum 0.9 --lr 0.05 --epochs 5 --batch-size 16 -o tuned.onnx\n"
               "  onnx-train bert.onnx --data d.npz --input ids=ids --target label --output logits --freeze 'embed*' "
               "-o tuned.onnx\n"};
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
  app.add_option("--freeze", o.freeze, "params matching this glob stay fixed (repeatable)");
  app.add_option("--seed", o.seed, "data order and random ops")->capture_default_str();
  app.add_option("-o,--out", o.out, "the trained .onnx to write")->required();
  CLI11_PARSE(app, argc, argv);

  try {
    if(o.epochs < 1) throw Error("--epochs must be at least 1");
    if(o.batch < 1) throw Error("--batch-size must be at least 1");
    auto model = Model::load(o.model);
    bool hasOutput = false;
    for(auto& out : model->outputs()) hasOutput = hasOutput || out.name == o.output;
    if(!hasOutput) throw Error(str(o.model, ": the model has no output '", o.output, "'"));
    std::map<std::string, std::string> feeds;  // input name -> data key
    std::vector<std::string> keys{o.target};
    for(const auto& spec : o.inputs) {
      size_t eq = spec.find('=');
      if(eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw Error(str("--input '", spec, "': expected NAME=KEY"));
      std::string name = spec.substr(0, eq);
      bool known = false;
      for(auto& i : model->inputs()) known = known || i.name == name;
      if(!known) throw Error(str("--input '", spec, "': the model has no input '", name, "'"));
      feeds[name] = spec.substr(eq + 1);
      keys.push_back(spec.substr(eq + 1));
    }
    Data train = loadData(o.data, keys);
    Data valid;
    if(!o.valid.empty()) valid = loadData(o.valid, keys);

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
    int64_t stepsPerEpoch = (train.n + o.batch - 1) / o.batch;
    LrSchedule schedule(o.lr, static_cast<size_t>(o.warmup), LrSchedule::parseDecay(o.decay),
                        static_cast<size_t>(stepsPerEpoch * o.epochs), o.minLr);

    auto graph = New<ExpressionGraph>();
    graph->setSeed(o.seed);
    std::mt19937_64 order(o.seed);
    bool frozen = false, labelsChecked = false;
    ImportedGraph last;
    // One batch through the model; returns (loss, correct predictions).
    auto runBatch = [&](const Data& d, const std::vector<int64_t>& idx, bool trainStep) {
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
      Expr out;
      for(auto& kv : last.spec.outputs)
        if(kv.first == o.output) out = kv.second;
      if(!out) throw Error(str("output '", o.output, "' is not a tensor output"));
      Tensor target = rows(d.arrays.at(o.target), idx);
      Expr loss;
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
      Expr t = graph->constant(target);
      try {
        loss = o.loss == "ce" ? crossEntropyLoss(out, t) : o.loss == "mse" ? mseLoss(out, t)
             : o.loss == "l1" ? l1Loss(out, t) : bceLoss(out, t);
      } catch(const Error& e) {
        throw Error(str("--loss ", o.loss, " on output '", o.output, "' (", out->shape(), "): ", e.what()));
      }
      loss->keepValue();
      out->keepValue();
      graph->forward();
      double l = scalarOf(loss->val());
      int64_t correct = 0;
      if(o.loss == "ce") {
        std::vector<double> logits, labels;
        out->val()->get(logits);
        target->get(labels);
        size_t classes = static_cast<size_t>(out->shape().dims()[out->shape().rank() - 1]);
        for(size_t i = 0; i < labels.size(); ++i) {
          auto b = logits.begin() + static_cast<std::ptrdiff_t>(i * classes);
          correct += std::max_element(b, b + static_cast<std::ptrdiff_t>(classes)) - b == static_cast<std::ptrdiff_t>(labels[i]);
        }
      }
      if(trainStep) {
        graph->backward(loss);
        opt->update(*graph);
      }
      return std::make_pair(l, correct);
    };

    size_t step = 0;
    bool tty = isatty(STDOUT_FILENO);
    for(int epoch = 1; epoch <= o.epochs; ++epoch) {
      std::vector<int64_t> perm(static_cast<size_t>(train.n));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), order);
      double sum = 0;
      int64_t seen = 0;
      auto t0 = std::chrono::steady_clock::now();
      for(int64_t b = 0; b < train.n; b += o.batch) {
        std::vector<int64_t> idx(perm.begin() + b, perm.begin() + std::min(train.n, b + o.batch));
        opt->setLearningRate(schedule.lr(step));
        double l = runBatch(train, idx, true).first;
        ++step;
        if(!std::isfinite(l)) throw Error(str("the loss is ", l, " at step ", step, " (epoch ", epoch, "); stopped"));
        sum += l * static_cast<double>(idx.size());
        seen += static_cast<int64_t>(idx.size());
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if(tty)
          std::cout << "\repoch " << epoch << "/" << o.epochs << " [" << seen << "/" << train.n << "] loss "
                    << sum / double(seen) << ", " << int(double(seen) / std::max(secs, 1e-9)) << " samples/s" << std::flush;
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if(tty) std::cout << "\r";
      std::cout << "epoch " << epoch << ": train loss " << sum / double(seen) << " ("
                << int(double(seen) / std::max(secs, 1e-9)) << " samples/s)";
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
    }

    // The trained model: the last graph's outputs, its params as initializers.
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
