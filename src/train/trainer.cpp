#include <onyx/train/trainer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <numeric>
#include <sstream>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/core/device.h>
#include <onyx/core/error.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/io/npz.h>
#include <onyx/onnx/checker.h>
#include <onyx/onnx/model_file.h>
#include <onyx/onnx/writer.h>
#include <onyx/runtime/model.h>
#include <onyx/train/accumulate.h>
#include <onyx/train/losses.h>
#include <onyx/train/optimizers.h>

namespace onyx {

namespace {

double scalarOf(const Tensor& t) {
  std::vector<double> v;
  t->get(v);
  return v.at(0);
}

// Doubles in checkpoints as C99 hex floats: they read back bit for bit.
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

const std::string& extraOf(const TrainState& s, const std::string& path, const std::string& key) {
  auto it = s.extra.find(key);
  if(it == s.extra.end()) throw Error(str(path, ": its state has no '", key, "' (not written by a Trainer)"));
  return it->second;
}

}  // namespace

// ---- construction and options

void Trainer::checkOptions(const TrainerOptions& o, const TrainerCallbacks& cb) {
  auto name = [&](const char* field) { return cb.optionName ? cb.optionName(field) : std::string(field); };
  if(o.epochs < 1) throw Error(str(name("epochs"), " must be at least 1"));
  if(o.batchSize < 1) throw Error(str(name("batchSize"), " must be at least 1"));
  if(o.checkpointEvery < 1) throw Error(str(name("checkpointEvery"), " must be at least 1"));
  if(o.accumulate < 1) throw Error(str(name("accumulate"), " must be at least 1"));
  if(o.resume && o.checkpointDir.empty()) throw Error(str(name("resume"), " needs ", name("checkpointDir")));
  if(o.threads < 0 || o.threads > host::kMaxThreads)
    throw Error(str(name("threads"), " = ", o.threads, ": must be 0 (the default) to ", host::kMaxThreads));
  parseComputePrecision(o.precision, name("precision"));
}

size_t Trainer::stepsPerEpoch(int64_t samples, const TrainerOptions& o) {
  const int64_t stepSamples = o.batchSize * o.accumulate;
  return static_cast<size_t>((samples + stepSamples - 1) / stepSamples);
}

Trainer::Trainer(const std::string& modelPath, TrainerOptions options, TrainerCallbacks callbacks)
    : Trainer(Model::load(modelPath), std::move(options), std::move(callbacks)) {}

namespace {

// Quantized models are run, not trained (docs/quantization.md): the first
// quantized node of the model's graph, as a one-line error.
void refuseQuantized(const Model& m) {
  static const char* const kOps[] = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul",
                                     "MatMulInteger", "ConvInteger", "DynamicQuantizeLinear"};
  for(const auto& n : m.file().proto.graph().node()) {
    const std::string& op = n.op_type();
    bool quantized = false;
    if(n.domain().empty() || n.domain() == "ai.onnx")
      for(const char* q : kOps) quantized = quantized || op == q;
    else if(n.domain() == "com.microsoft")
      quantized = op.rfind("QLinear", 0) == 0 || op == "QGemm" || op.rfind("DynamicQuantize", 0) == 0 ||
                  op == "QAttention" || op == "MatMulIntegerToFloat";
    if(quantized)
      throw Error(str(m.path(), ": node '", n.name(), "' (", op, ") is quantized: quantized models are run, not ",
                      "trained; fine-tune the float model and quantize it afterwards (docs/quantization.md)"));
  }
}

}  // namespace

Trainer::Trainer(std::shared_ptr<const Model> model, TrainerOptions options, TrainerCallbacks callbacks)
    : o_(std::move(options)), cb_(std::move(callbacks)), model_(std::move(model)) {
  ONYX_CHECK(model_, "Trainer: no model");
  checkOptions(o_, cb_);
  refuseQuantized(*model_);
  const std::string& path = model_->path();
  if(o_.output.empty()) {
    if(model_->outputs().empty()) throw Error(str(path, ": the model has no outputs"));
    o_.output = model_->outputs().front().name;
  }
  bool hasOutput = false;
  for(auto& out : model_->outputs()) hasOutput = hasOutput || out.name == o_.output;
  if(!hasOutput) throw Error(str(path, ": the model has no output '", o_.output, "'"));
  if(o_.inputs.empty())
    for(auto& in : model_->inputs()) o_.inputs[in.name] = in.name;
  keys_.push_back(o_.target);
  for(auto& [input, key] : o_.inputs) {
    bool known = false;
    for(auto& in : model_->inputs()) known = known || in.name == input;
    if(!known) throw Error(str(optionName("inputs"), " '", input, "=", key, "': the model has no input '", input, "'"));
    if(std::find(keys_.begin(), keys_.end(), key) == keys_.end()) keys_.push_back(key);
  }

  OptimizerOptions oo;
  oo.lr = o_.lr;
  oo.momentum = o_.momentum;
  oo.weightDecay = o_.weightDecay;
  oo.clipNorm = o_.clipNorm;
  opt_ = optimizerByName(o_.optimizer, oo);
  if(!opt_) throw Error(str(optionName("optimizer"), " '", o_.optimizer, "': expected sgd, adagrad, adam or adamw"));
  if(o_.loss != "ce" && o_.loss != "mse" && o_.loss != "l1" && o_.loss != "bce")
    throw Error(str(optionName("loss"), " '", o_.loss, "': expected ce, mse, l1 or bce"));
  LrSchedule::Decay decay = LrSchedule::parseDecay(o_.decay);
  // A decaying schedule needs its end; without totalSteps it comes from the
  // data (setData) or, for step() alone, is an error there.
  if(decay == LrSchedule::Decay::Constant || o_.totalSteps > 0) buildSchedule(o_.totalSteps);

  graph_ = New<ExpressionGraph>();
  graph_->setDevice(parseDevice(o_.device));
  graph_->setSeed(o_.seed);
  const ComputePrecision precision = parseComputePrecision(o_.precision, optionName("precision"));
  graph_->setComputePrecision(precision);
  if(precision == ComputePrecision::bfloat16 && graph_->getDeviceId().type != DeviceType::cpu)
    notice("bf16 compute is a CPU option: the GPU computes in float32");
  else if(precision == ComputePrecision::bfloat16 && !bf16Available())
    notice("this CPU has no bfloat16 instructions (AVX512_BF16 or AMX): computing in float32");
  order_.seed(o_.seed);
  orderAtEpochStart_ = rngText(order_);
  imported_ = std::make_unique<ImportedGraph>();
}

Trainer::~Trainer() = default;

std::string Trainer::optionName(const std::string& field) const {
  return cb_.optionName ? cb_.optionName(field) : field;
}

void Trainer::notice(const std::string& msg) const {
  if(cb_.notice) cb_.notice(msg);
}

void Trainer::buildSchedule(size_t totalSteps) {
  schedule_ = std::make_unique<LrSchedule>(o_.lr, o_.warmup, LrSchedule::parseDecay(o_.decay), totalSteps, o_.minLr);
}

double Trainer::learningRate() const { return schedule_ ? schedule_->lr(step_) : o_.lr; }

void Trainer::setData(Dataset train, Dataset valid) {
  ONYX_CHECK(!train.empty(), "Trainer::setData: the training data has no samples");
  train_ = std::move(train);
  valid_ = std::move(valid);
  for(Dataset* d : {&train_, &valid_}) {
    if(d->empty()) continue;
    for(const auto& key : keys_) d->array(key);  // a missing array, named before anything runs
    // Float data of another width than the model's input (numpy's float64
    // default, say) is converted once here; anything else must match.
    for(auto& [input, key] : o_.inputs)
      for(auto& info : model_->inputs()) {
        if(info.name != input) continue;
        const Tensor& t = d->array(key);
        if(info.type != Type::undefined && t->type() != info.type && isFloat(t->type()) && isFloat(info.type))
          d->setArray(key, convertType(*t, info.type));
      }
  }
  labelsToCheck_ = {&train_, &valid_};
  if(o_.totalSteps == 0) buildSchedule(stepsPerEpoch(train_.size(), o_) * static_cast<size_t>(o_.epochs));
}

// ---- one batch

Batch Trainer::prepared(const Batch& batch) const {
  Batch b = batch;
  for(auto& [input, key] : o_.inputs) {
    auto it = b.find(key);
    if(it == b.end()) throw Error(str("the batch has no array '", key, "' for the model input '", input, "'"));
    for(auto& info : model_->inputs())
      if(info.name == input && info.type != Type::undefined && it->second->type() != info.type &&
         isFloat(it->second->type()) && isFloat(info.type))
        it->second = convertType(*it->second, info.type);
  }
  return b;
}

Expr Trainer::build(const Batch& raw, bool train, bool withLoss) {
  // Every step and evaluation builds its graph here first, on the thread
  // that then runs it (and the optimizer's update).
  if(o_.threads > 0) host::setNumThreads(o_.threads);
  Batch batch = prepared(raw);
  graph_->clear();
  graph_->setInference(!train);
  loss_ = nullptr;
  HostValues in;
  for(auto& [input, key] : o_.inputs) in[input] = HostValue::of(batch.at(key));
  if(sample_.empty())
    for(auto& [input, key] : o_.inputs) sample_[key] = batch.at(key);
  *imported_ = importGraph(*model_, *graph_, in, true);
  // Training steps run the fused graph; an export (train false) the
  // model's own ops.
  if(train) optimizeForTraining(*graph_, *imported_);
  built_ = true;
  if(!frozen_) {
    size_t n = freezeParams(*graph_, o_.freeze);
    for(const auto& p : o_.freeze)
      if(freezeParams(*graph_, {p}) == 0) throw Error(str(optionName("freeze"), " '", p, "' matches no param"));
    if(!o_.freeze.empty()) notice(str("froze ", n, " params"));
    frozen_ = true;
  }
  out_ = nullptr;
  for(auto& kv : imported_->spec.outputs)
    if(kv.first == o_.output) out_ = kv.second;
  if(!out_) throw Error(str("output '", o_.output, "' is not a tensor output"));
  if(!withLoss) return nullptr;

  auto target = batch.find(o_.target);
  if(target == batch.end()) throw Error(str("the batch has no target array '", o_.target, "'"));
  Tensor t = target->second;
  if(o_.loss == "ce") {
    if(!isInt(t->type()))
      throw Error(str(optionName("loss"), " ce takes integer labels; '", o_.target, "' is ", typeName(t->type())));
    if(!labelsToCheck_.empty()) {  // every label of the data, by its sample index
      int64_t classes = out_->shape().dims()[out_->shape().rank() - 1];
      for(const Dataset* d : labelsToCheck_) {
        if(d->empty()) continue;
        try {
          checkLabels(*d->array(o_.target), classes);
        } catch(const Error& e) {
          throw Error(str(d->name(), ": '", o_.target, "': ", e.what()));
        }
      }
      labelsToCheck_.clear();
    }
  } else if(t->type() != out_->value_type()) {
    t = convertType(*t, out_->value_type());
  }
  if(t->getDeviceId() != graph_->getDeviceId()) {  // the batch's targets, to the graph's device
    Tensor dev = TensorBase::create(t->shape(), t->type(), graph_->getDeviceId());
    dev->copyFrom(*t);
    t = dev;
  }
  Expr te = graph_->constant(t);
  try {
    loss_ = o_.loss == "ce" ? crossEntropyLoss(out_, te) : o_.loss == "mse" ? mseLoss(out_, te)
          : o_.loss == "l1" ? l1Loss(out_, te) : bceLoss(out_, te);
  } catch(const Error& e) {
    throw Error(str(optionName("loss"), " ", o_.loss, " on output '", o_.output, "' (", out_->shape(), "): ", e.what()));
  }
  return loss_;
}

std::pair<double, int64_t> Trainer::runBatch(const Batch& batch, bool train) {
  Expr loss = build(batch, train, true);
  loss->keepValue();
  out_->keepValue();
  graph_->forward();
  double l = scalarOf(loss->val());
  int64_t correct = 0;
  if(o_.loss == "ce") {
    std::vector<double> logits, labels;
    out_->val()->get(logits);
    batch.at(o_.target)->get(labels);
    size_t classes = static_cast<size_t>(out_->shape().dims()[out_->shape().rank() - 1]);
    for(size_t i = 0; i < labels.size(); ++i) {
      auto b = logits.begin() + static_cast<std::ptrdiff_t>(i * classes);
      correct += std::max_element(b, b + static_cast<std::ptrdiff_t>(classes)) - b == static_cast<std::ptrdiff_t>(labels[i]);
    }
  }
  if(train && std::isfinite(l)) {  // the update is the caller's (after accumulation)
    graph_->backward(loss);
    applyStateUpdates(*imported_);
  }
  return {l, correct};
}

double Trainer::step(const Batch& batch) { return stepAccumulated({batch}); }

double Trainer::stepAccumulated(const std::vector<Batch>& microBatches) {
  ONYX_CHECK(!microBatches.empty(), "Trainer::step: no batch");
  if(!schedule_) buildSchedule(o_.totalSteps);
  double lr = schedule_->lr(static_cast<size_t>(step_));
  opt_->setLearningRate(lr);
  int64_t total = 0;
  for(const Batch& b : microBatches) total += batchSamples(b);
  ONYX_CHECK(total > 0, "Trainer::step: the batch has no samples");
  const bool accumulate = o_.accumulate > 1 || microBatches.size() > 1;
  GradAccumulator acc;
  double l = 0;
  for(const Batch& b : microBatches) {
    double lb = runBatch(b, true).first;
    if(!std::isfinite(lb)) {
      std::string kept = lastCheckpoint_.empty() ? ""
                         : savedStep_ ? str("; the last good checkpoint is ", lastCheckpoint_, " (step ", savedStep_, ")")
                                      : str("; no checkpoint was written yet");
      throw Error(str("the loss is ", lb, " at step ", step_ + 1, " (epoch ", epoch_, "); stopped before updating", kept));
    }
    double share = double(batchSamples(b)) / double(total);
    if(accumulate) acc.add(*graph_, share);
    l += lb * share;
  }
  if(accumulate) acc.apply(*graph_);
  opt_->update(*graph_);
  ++step_;
  return l;
}

EvalResult Trainer::evaluate(const std::vector<Batch>& batches) {
  EvalResult r;
  double sum = 0;
  int64_t correct = 0;
  for(const Batch& b : batches) {
    int64_t n = batchSamples(b);
    auto [l, c] = runBatch(b, false);
    sum += l * double(n);
    correct += c;
    r.samples += n;
  }
  if(r.samples) {
    r.loss = sum / double(r.samples);
    r.accuracy = double(correct) / double(r.samples);
  }
  return r;
}

EvalResult Trainer::evaluate(const Dataset& data) {
  EvalResult r;
  double sum = 0;
  int64_t correct = 0;
  for(int64_t b = 0; b < data.size(); b += o_.batchSize) {  // one batch at a time: validation sets can be large
    Batch batch = data.range(b, b + o_.batchSize, keys_);
    auto [l, c] = runBatch(batch, false);
    sum += l * double(batchSamples(batch));
    correct += c;
  }
  r.samples = data.size();
  if(r.samples) {
    r.loss = sum / double(r.samples);
    r.accuracy = double(correct) / double(r.samples);
  }
  return r;
}

double Trainer::computeGradients(const Batch& batch) {
  Expr loss = build(batch, true, true);
  loss->keepValue();
  graph_->forward();
  graph_->backward(loss);
  return scalarOf(loss->val());
}

// ---- state

std::vector<std::pair<std::string, Tensor>> Trainer::params() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for(Expr p : *graph_->params()) r.emplace_back(p->name(), p->val());
  return r;
}

std::vector<std::pair<std::string, Tensor>> Trainer::gradients() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for(Expr p : *graph_->params())
    if(p->trainable() && p->grad()) r.emplace_back(p->name(), p->grad());
  return r;
}

std::vector<std::pair<std::string, Tensor>> Trainer::stateUpdates() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for(const auto& [state, next] : imported_->stateUpdates) r.emplace_back(state->name(), next->val());
  return r;
}

Tensor Trainer::lossValue() const { return loss_ ? loss_->val() : Tensor(); }

// ---- checkpoints

// The settings a resumed run must share with the run that wrote the
// checkpoint (anything else would not continue the same training).
std::map<std::string, std::string> Trainer::runSettings() const {
  std::ostringstream lr;
  lr << std::setprecision(17) << o_.lr;
  return {{"optimizer", o_.optimizer},  {"loss", o_.loss},
          {"batch_size", std::to_string(o_.batchSize)}, {"lr", lr.str()},
          {"seed", std::to_string(o_.seed)}, {"shuffle", o_.shuffle ? "yes" : "no"},
          {"accumulate", std::to_string(o_.accumulate)}};
}

void Trainer::save(const std::string& path, uint64_t epoch, uint64_t offset) {
  TrainState s;
  s.step = step_;
  s.epoch = epoch;
  s.sampleOffset = offset;
  s.extra = runSettings();
  s.extra["order_rng"] = orderAtEpochStart_;
  s.extra["epoch_loss_sum"] = hexDouble(epochSum_);
  s.extra["epoch_seen"] = std::to_string(epochSeen_);
  ::onyx::saveCheckpoint(path, *graph_, *opt_, s);
  savedStep_ = step_;
  lastCheckpoint_ = path;
}

void Trainer::saveCheckpoint(const std::string& path) { save(path, epoch_, offset_); }

void Trainer::ensureParams() {
  if(built_) return;
  if(!train_.empty()) {
    build(train_.range(0, o_.batchSize, keys_), true, true);  // creates every param
  } else if(!sample_.empty()) {
    build(sample_, true, false);
  } else {
    throw Error("Trainer: the params exist once a batch was seen; call setData() or step() first");
  }
}

TrainState Trainer::loadCheckpoint(const std::string& path) {
  ensureParams();
  TrainState state = ::onyx::loadCheckpoint(path, *graph_, *opt_);
  for(auto& [k, v] : runSettings()) {
    auto it = state.extra.find(k);
    if(it != state.extra.end() && it->second != v)
      throw Error(str(path, ": written with ", k, " ", it->second, ", this run has ", v,
                      "; resume with the same settings or start a new ", optionName("checkpointDir")));
  }
  std::istringstream(extraOf(state, path, "order_rng")) >> order_;
  orderAtEpochStart_ = extraOf(state, path, "order_rng");
  std::sscanf(extraOf(state, path, "epoch_loss_sum").c_str(), "%la", &epochSum_);
  epochSeen_ = std::stoll(extraOf(state, path, "epoch_seen"));
  step_ = state.step;
  epoch_ = state.epoch;
  offset_ = state.sampleOffset;
  savedStep_ = step_;
  lastCheckpoint_ = path;
  return state;
}

std::string Trainer::checkpointPath() const {
  return o_.checkpointDir.empty() ? "" : (std::filesystem::path(o_.checkpointDir) / "checkpoint.npz").string();
}

// ---- the epoch loop

std::vector<EpochInfo> Trainer::run() {
  if(train_.empty()) throw Error("Trainer::run: no training data (setData)");
  const int64_t n = train_.size();
  const int64_t stepSamples = o_.batchSize * o_.accumulate;  // samples per optimizer step
  TrainState state;
  state.step = step_;
  state.epoch = epoch_;
  state.sampleOffset = offset_;
  const std::string ckpt = checkpointPath();
  if(!ckpt.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o_.checkpointDir, ec);
    if(ec) throw Error(str(optionName("checkpointDir"), " '", o_.checkpointDir, "': ", ec.message()));
    lastCheckpoint_ = ckpt;
    for(const auto& f : io::removeStaleTemporaries(ckpt))
      notice(str("removed ", f, " (left by an interrupted write)"));
    if(o_.resume && std::filesystem::exists(ckpt)) {
      state = loadCheckpoint(ckpt);
      if(cb_.resumed) cb_.resumed(ckpt, state);
    } else if(o_.resume) {
      notice(str("no checkpoint in ", o_.checkpointDir, " yet; starting from the model"));
    }
  }
  if(cb_.started) cb_.started(state);

  std::vector<EpochInfo> history;
  for(int epoch = static_cast<int>(state.epoch); epoch <= o_.epochs; ++epoch) {
    epoch_ = static_cast<uint64_t>(epoch);
    bool resumedEpoch = epoch == static_cast<int>(state.epoch) && state.sampleOffset > 0;
    if(!resumedEpoch) {
      orderAtEpochStart_ = rngText(order_);
      epochSum_ = 0;
      epochSeen_ = 0;
    } else {
      std::istringstream(orderAtEpochStart_) >> order_;  // the order of the epoch being resumed
    }
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    if(o_.shuffle) std::shuffle(perm.begin(), perm.end(), order_);
    auto t0 = std::chrono::steady_clock::now();
    const int64_t startSeen = epochSeen_;
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    for(int64_t s0 = resumedEpoch ? static_cast<int64_t>(state.sampleOffset) : 0; s0 < n; s0 += stepSamples) {
      const int64_t s1 = std::min(n, s0 + stepSamples);
      std::vector<Batch> micro;  // the step's micro-batches
      for(int64_t b = s0; b < s1; b += o_.batchSize)
        micro.push_back(train_.rows(std::vector<int64_t>(perm.begin() + b, perm.begin() + std::min(s1, b + o_.batchSize)),
                                    keys_));
      const double lr = learningRate();
      const double l = stepAccumulated(micro);
      offset_ = static_cast<uint64_t>(s1);
      epochSum_ += l * static_cast<double>(s1 - s0);
      epochSeen_ += s1 - s0;
      if(cb_.step) {
        StepInfo si;
        si.step = step_;
        si.epoch = epoch;
        si.loss = l;
        si.lr = lr;
        si.epochDone = s1;
        si.epochSize = n;
        si.epochLoss = epochSum_ / double(epochSeen_);
        si.trainedNow = epochSeen_ - startSeen;
        si.seconds = since();
        cb_.step(si);
      }
      if(!ckpt.empty() && step_ % static_cast<uint64_t>(o_.checkpointEvery) == 0 && s1 < n)
        save(ckpt, static_cast<uint64_t>(epoch), static_cast<uint64_t>(s1));
    }
    EpochInfo info;
    info.epoch = epoch;
    info.seconds = since();
    info.trainLoss = epochSum_ / double(epochSeen_);
    info.trainedNow = epochSeen_ - startSeen;
    if(cb_.epochTrained) cb_.epochTrained(info);
    if(!valid_.empty()) {
      info.valid = evaluate(valid_);
      info.validated = true;
    }
    if(cb_.epochEnd) cb_.epochEnd(info);
    history.push_back(info);
    epoch_ = static_cast<uint64_t>(epoch + 1);
    offset_ = 0;
    if(!ckpt.empty()) {
      orderAtEpochStart_ = rngText(order_);
      epochSum_ = 0;
      epochSeen_ = 0;
      save(ckpt, epoch_, 0);
    }
  }
  return history;
}

// ---- export

ExportResult Trainer::exportModel(const std::string& path) {
  if(!train_.empty()) build(train_.range(0, o_.batchSize, keys_), false, false);
  else if(!sample_.empty()) build(sample_, false, false);
  else throw Error("Trainer::exportModel: no batch seen yet to build the model on; call setData() or step() first");
  ExportResult r = exportOnnx(imported_->spec);
  checkOnnxModel(r.model, path);
  writeOnnxModel(path, r);
  return r;
}

}  // namespace onyx
