// The code printed in shared/seeds/expression-graphs.md, snippet by snippet,
// unchanged. Only the glue a reader must supply is added (marked "glue"):
// main(), the data the snippets assume (N, NUM_FEATURES, inputData, b1), and a
// layer class for the snippet that calls graph() as a member function.
#include <onyx/onyx.h>

#include <iostream>
#include <vector>

using namespace onyx;

// glue: Marian's layers expose graph() as a member; this snippet lives in one.
struct Layer {
  Ptr<ExpressionGraph> graph_;
  Ptr<ExpressionGraph> graph() const { return graph_; }
  void build() {
    // construct a constant node with 1
    auto ones = graph()->ones({10,10});
    // construct a constant node with 0
    auto zeros = graph()->zeros({10,10});
    std::cout << "ones=" << ones->shape() << " zeros=" << zeros->shape() << std::endl;  // glue
  }
};

int main() {
  {
    // create a graph
    auto graph = New<ExpressionGraph>();
    // initialise graph with device options
    // here we specify device no. is 0
    // device type can be DeviceType::cpu or DeviceType::gpu
    graph->setDevice({0, DeviceType::cpu});
    // preallocate workspace memory (MB) for the graph
    graph->reserveWorkspaceMB(128);

    // glue: data assumed by the node-type snippets
    const int N = 4, NUM_FEATURES = 3;
    std::vector<float> inputData(N * NUM_FEATURES, 0.5f);
    auto b1 = graph->param("b1", {1, 5}, inits::zeros());

    // construct a constant node in the graph with default type
    auto x = graph->constant({N, NUM_FEATURES}, inits::fromVector(inputData));
    // construct a parameter node called W1 in the graph
    auto W1 = graph->param("W1", {NUM_FEATURES, 5}, inits::uniform(-0.1f, 0.1f));
    // perform affine transformation: x*W1+b
    // and then perform tanh activation function
    auto h = tanh(affine(x, W1, b1));
    Layer{graph}.build();  // glue
    graph->forward();      // glue
    std::cout << "h=" << h->shape() << std::endl;  // glue
  }
  {
    // create and initialise a graph object
    auto graph = New<ExpressionGraph>();
    graph->setDevice({0, DeviceType::cpu});
    graph->reserveWorkspaceMB(8);
    // add input node x
    auto x = graph->constant({1,1}, inits::fromValue(2));
    // add input node y
    auto y = graph->constant({1,1}, inits::fromValue(3));
    // define expression
    auto mulOp = x*y;
    auto sinOp = sin(x);
    auto z = mulOp + sinOp;
    // You can also define this expression: auto z = x*y + sin(x);

    // print the graph layout on console
    std::cout<<graph->graphviz()<<std::endl;

    // Perform the forward pass on the nodes of the graph
    graph->forward();
    // get the computation result of z
    std::vector<float> w;
    z->val()->get(w);
    std::cout<<"z="<<w[0]<<std::endl;
    // The output is: z=6.9093
  }
  {
    createLoggers();  // glue: as the debugging section recommends
    auto graph = New<ExpressionGraph>();  // glue: the modified Example 1
    graph->setDevice({0, DeviceType::cpu});
    graph->reserveWorkspaceMB(8);
    // add parameter node x
    auto x = graph->param("x", {1,1}, inits::fromValue(2));
    auto y = graph->constant({1,1}, inits::fromValue(3));  // glue
    auto z = x*y + sin(x);                                  // glue
    // mark node x for debugging with logging message "Parameter x"
    debug(x, "Parameter x");

    graph->forward();  // glue
    // Perform the backward pass on the trainable nodes of the graph
    graph->backward();
    // get the gradient of x node
    std::vector<float> b;
    x->grad()->get(b);
    std::cout<<"dz/dx="<<b[0]<<std::endl;
    // The output is: dz/dx=2.58385

    // pass the actual value to the model
    auto actual = graph->constant({1,1}, inits::fromValue(6));
    // define loss function
    auto loss = abs(actual-z);

    // Perform backpropagation on the graph
    graph->backprop();
    // This function is equal to the following code:
    /*
    graph->forward();
    graph->backward();
    */

    // set up Sgd optimiser with 0.005 learning rate
    auto opt = Optimizer<Sgd>(0.005);
    // update parameters
    opt->update(graph);
    // get the new value of x
    std::vector<float> v;
    x->val()->get(v);
    std::cout<<"x="<<v[0]<<std::endl;
    // The output is: x=1.98708

    // Choose optimizer (Sgd, Adagrad, Adam) and initial learning rate
    auto adam = Optimizer<Adam>(0.01);  // glue: the doc names this one opt too
    (void)adam;

    // return the Parameters object related to the graph
    // The Parameters object holds the whole set of the parameter nodes.
    graph->params();

    // enable gradient-checkpointing for a graph
    graph->setCheckpointing(true);

    // specify the filename
    std::string filename = "my_model.npz";
    // save all the parameters into a file
    graph->save(filename);
    // load model from a file
    graph->load(filename);
    std::cout << "loaded x=" << x->val()->scalar<float>() << std::endl;  // glue
  }
  return 0;
}
