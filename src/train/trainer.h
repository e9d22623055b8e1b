// The fine-tuning loop as a library: an ONNX model, a loss on one of its
// outputs, an optimizer with a learning-rate schedule, frozen params,
// gradient clipping and accumulation, validation, checkpoints that resume bit
// for bit, a stop on a non-finite loss, and the trained model exported as
// ONNX. `onnx-train` is a command line over this class.
//
//   TrainerOptions o;
//   o.inputs = {{"x", "x"}};                     // model input <- batch array
//   o.target = "y";
//   o.loss = "ce";
//   o.lr = 0.02;
//   Trainer trainer("model.onnx", o);
//   trainer.fit(Dataset::loadNpz("train.npz"), Dataset::loadNpz("valid.npz"));
//   trainer.exportModel("tuned.onnx");
//
// or a loop of one's own: trainer.step(batch) returns the loss of one
// optimizer step; evaluate(), gradients(), params(), saveCheckpoint() and
// loadCheckpoint() are there between steps.
//
// Each batch builds its graph anew (importGraph with trainable params: graphs
// are dynamic); the params, the optimizer state and the random generators
// live in the Trainer and survive between batches. The library prints
// nothing: what a front end shows comes through TrainerCallbacks.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <onyx/core/ptr.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/node.h>
#include <onyx/train/checkpoint.h>
#include <onyx/train/dataset.h>
#include <onyx/train/schedule.h>

namespace onyx {

class ExpressionGraph;
class Model;
class OptimizerBase;
struct ExportResult;
struct ImportedGraph;

struct TrainerOptions {
  // What the model is fed and what the loss compares.
  std::map<std::string, std::string> inputs;  // model input -> batch array; empty: every input from the array of its name
  std::string target = "y";                   // the batch array holding the targets
  std::string output;                         // the model output the loss is on; empty: the first output
  std::string loss = "ce";                    // ce (integer labels on logits), mse, l1, bce (probabilities)
  // The optimizer and its learning rate.
  std::string optimizer = "adam";             // sgd, adagrad, adam, adamw
  double lr = 1e-3;
  double momentum = 0;                        // sgd
  double weightDecay = 0;                     // decoupled for adamw
  double clipNorm = 0;                        // clip the global gradient norm to this (0: off)
  size_t warmup = 0;                          // steps of linear warmup
  std::string decay = "constant";             // after warmup: constant, linear or cosine
  double minLr = 0;                           // the rate at the end of the decay
  size_t totalSteps = 0;                      // where the decay ends; 0: epochs x steps per epoch of setData's data
  // The loop of run().
  int epochs = 1;
  int64_t batchSize = 32;                     // samples per micro-batch
  int64_t accumulate = 1;                     // micro-batches per optimizer step
  bool shuffle = true;                        // a new sample order every epoch (else file order)
  uint64_t seed = 1;                          // data order and random ops (Dropout)
  std::vector<std::string> freeze;            // params matching one of these globs stay fixed
  std::string device = "cpu";                 // cpu or gpu0: where the graph, params and optimizer state live
  // CPU threads of the steps' parallel regions (BLAS and oneDNN included),
  // set on the thread that runs them; 0: OpenMP's default. As a Session's
  // SessionOptions::threads.
  int threads = 0;
  // float32, or bf16: matrix products and convolutions (forward and
  // backward) on bfloat16-rounded operands with float32 sums, every value
  // and param kept in float32 (ComputePrecision). Where the CPU has no
  // bfloat16 instructions it computes in float32 (a notice says so).
  std::string precision = "float32";
  std::string checkpointDir;                  // run() writes checkpointDir/checkpoint.npz as it goes
  int64_t checkpointEvery = 100;              // steps between checkpoints (and one per epoch)
  bool resume = false;                        // run() continues from checkpointDir/checkpoint.npz when it exists
};

// Loss (and, for "ce", accuracy) over some batches, weighted by samples.
struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // "ce" only: the fraction of argmax(output) == label
  int64_t samples = 0;
};

// After each optimizer step of run().
struct StepInfo {
  uint64_t step = 0;         // optimizer steps done, this one included
  int epoch = 0;
  double loss = 0;           // mean loss of the step's samples
  double lr = 0;             // the learning rate the step used
  int64_t epochDone = 0;     // samples of this epoch done
  int64_t epochSize = 0;     // samples per epoch
  double epochLoss = 0;      // mean loss over this epoch's samples so far
  int64_t trainedNow = 0;    // samples of this epoch trained by this run() (not before a resume)
  double seconds = 0;        // since this epoch started in this run()
};

// At the end of an epoch of run().
struct EpochInfo {
  int epoch = 0;
  double trainLoss = 0;      // mean loss over the epoch's samples
  int64_t trainedNow = 0;    // samples of the epoch trained by this run()
  double seconds = 0;        // time of those samples
  bool validated = false;    // valid holds the validation data's result
  EvalResult valid;
};

// How the Trainer talks to a front end; every member may be left empty.
struct TrainerCallbacks {
  // How messages name an option: the TrainerOptions field by default
  // ("batchSize"); onnx-train gives its flags ("--batch-size").
  std::function<std::string(const std::string& field)> optionName;
  // Remarks on the side: "froze 3 params", "removed DIR/checkpoint.npz.tmp.7
  // (left by an interrupted write)", "no checkpoint in DIR yet; ...".
  std::function<void(const std::string&)> notice;
  // run() has loaded the checkpoint `path` and goes on from `state`.
  std::function<void(const std::string& path, const TrainState& state)> resumed;
  // run() starts its loop from `state` (step 0, epoch 1, or where a resumed
  // checkpoint left off).
  std::function<void(const TrainState&)> started;
  // After each optimizer step of run(), before its checkpoint is written.
  std::function<void(const StepInfo&)> step;
  // An epoch's steps are done; validation comes next.
  std::function<void(const EpochInfo&)> epochTrained;
  // After validation, before the epoch's checkpoint.
  std::function<void(const EpochInfo&)> epochEnd;
};

class Trainer {
public:
  // Loads the model; checks the options against it (an output and inputs
  // it has, known loss/optimizer/decay names, a usable device). A bad
  // option is a one-line onyx::Error naming it.
  Trainer(const std::string& modelPath, TrainerOptions options, TrainerCallbacks callbacks = {});
  Trainer(std::shared_ptr<const Model> model, TrainerOptions options, TrainerCallbacks callbacks = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // The option checks that need no model (epochs, batchSize, accumulate,
  // checkpointEvery >= 1; resume needs checkpointDir); the constructor runs
  // them too.
  static void checkOptions(const TrainerOptions& o, const TrainerCallbacks& callbacks = {});
  // Optimizer steps per epoch of `samples` samples.
  static size_t stepsPerEpoch(int64_t samples, const TrainerOptions& o);

  // ---- the epoch loop (what onnx-train runs) ----
  // The data run() trains and validates on. Float arrays fed to the model
  // are converted to the types the model declares (numpy's float64 to a
  // float32 input, say). With loss "ce" every label of both is checked
  // against the output's classes when the first graph is built.
  void setData(Dataset train, Dataset valid = Dataset());
  // Up to options().epochs passes over the training data in batches of
  // batchSize (accumulate of them per step), shuffled with the seed;
  // validation after each epoch; checkpoints every checkpointEvery steps and
  // at each epoch's end; resume (from where the checkpoint left off, bit for
  // bit). It goes on from the Trainer's position (epoch 1 when new), so a
  // second run() after the last epoch does nothing. A non-finite loss stops
  // before the update: an onyx::Error naming the step and the last good
  // checkpoint. An exception thrown by a callback ends it too (after the
  // last checkpoint, as a killed process would). Returns the epochs it ran.
  std::vector<EpochInfo> run();
  std::vector<EpochInfo> fit(Dataset train, Dataset valid = Dataset()) {
    setData(std::move(train), std::move(valid));
    return run();
  }

  // ---- a loop of one's own ----
  // One optimizer step on `batch` (model inputs and the target by their
  // batch names); returns its mean loss. The learning rate follows the
  // schedule at the current step.
  double step(const Batch& batch);
  // One optimizer step over several micro-batches, gradients accumulated,
  // each weighted by its share of the samples; returns the mean loss.
  double stepAccumulated(const std::vector<Batch>& microBatches);
  // Loss (and accuracy) without training: inference mode (running
  // statistics, no dropout), nothing changes.
  EvalResult evaluate(const std::vector<Batch>& batches);
  EvalResult evaluate(const Dataset& data);  // batches of batchSize in file order
  // Forward and backward on `batch` in training mode without changing
  // params, buffers or optimizer: then gradients(), stateUpdates() and
  // lossValue() read them. Returns the loss.
  double computeGradients(const Batch& batch);

  // ---- state (tensors on the Trainer's device: the params' own, which the
  // next step changes; gradients and state updates last until the next batch) ----
  // Every param (trainable or not, BatchNormalization's running statistics
  // included) by name, in the graph's order; empty before the first batch.
  std::vector<std::pair<std::string, Tensor>> params() const;
  // The gradients of the trainable params from the last backward pass.
  std::vector<std::pair<std::string, Tensor>> gradients() const;
  // The buffers' next values of the last training batch (by buffer name).
  std::vector<std::pair<std::string, Tensor>> stateUpdates() const;
  // The loss value of the last batch (rank 0, the output's type).
  Tensor lossValue() const;
  uint64_t steps() const { return step_; }
  double learningRate() const;  // of the next step
  const TrainerOptions& options() const { return o_; }
  const Model& model() const { return *model_; }
  ExpressionGraph& graph() { return *graph_; }
  OptimizerBase& optimizer() { return *opt_; }

  // ---- checkpoints and export ----
  // Params, optimizer state, step, random generators and the position in
  // the epoch, atomically (train/checkpoint.h) with the settings a resumed
  // run must share.
  void saveCheckpoint(const std::string& path);
  // Restores what saveCheckpoint wrote; other settings than this Trainer's
  // are an onyx::Error. Before any batch, builds the graph on the first rows
  // of setData's training data to create the params.
  TrainState loadCheckpoint(const std::string& path);
  // checkpointDir/checkpoint.npz ("" without a checkpointDir).
  std::string checkpointPath() const;
  // The trained model as ONNX: an inference graph (running statistics, no
  // dropout) with the params as initializers, checked and written atomically.
  ExportResult exportModel(const std::string& path);

private:
  std::string optionName(const std::string& field) const;
  void notice(const std::string& msg) const;
  void buildSchedule(size_t totalSteps);
  Batch prepared(const Batch& batch) const;
  // Builds the graph for one batch (train: training mode) and returns the
  // loss on the output (null without `withLoss`).
  Expr build(const Batch& batch, bool train, bool withLoss);
  // One batch forward (and backward when training and the loss is finite):
  // the loss and the number of correct predictions ("ce").
  std::pair<double, int64_t> runBatch(const Batch& batch, bool train);
  void ensureParams();
  void save(const std::string& path, uint64_t epoch, uint64_t offset);
  std::map<std::string, std::string> runSettings() const;

  TrainerOptions o_;
  TrainerCallbacks cb_;
  std::shared_ptr<const Model> model_;
  std::vector<std::string> keys_;  // the batch arrays read: target, then the inputs'
  Ptr<ExpressionGraph> graph_;
  Ptr<OptimizerBase> opt_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<ImportedGraph> imported_;  // the last graph built
  Expr out_, loss_;
  Dataset train_, valid_;
  std::vector<const Dataset*> labelsToCheck_;
  Batch sample_;  // the first batch's model inputs (to build graphs on without data)
  bool built_ = false;   // a graph was built: the params exist
  bool frozen_ = false;
  std::mt19937_64 order_;          // the data order
  std::string orderAtEpochStart_;  // order_ as the current epoch began
  uint64_t step_ = 0, savedStep_ = 0;
  uint64_t epoch_ = 1, offset_ = 0;  // position in the data
  double epochSum_ = 0;            // sum of loss x samples over the epoch
  int64_t epochSeen_ = 0;
  std::string lastCheckpoint_;     // where the last good checkpoint is kept ("": none kept)
};

}  // namespace onyx
