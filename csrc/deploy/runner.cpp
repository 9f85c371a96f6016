// A model running with no Python at all: load the operator library, load an AOTInductor package (.pt2), run it
// on inputs from files, write its outputs to files.
//
//   myops_runner [--load LIBRARY.so]... PACKAGE.pt2 INPUT_DIR OUTPUT_DIR
//
// INPUT_DIR/inputs.txt names one input per line: a file of raw little-endian float32 values, then the sizes,
// e.g. "x.f32 8 16". The outputs are written the same way: OUTPUT_DIR/outputs.txt and output0.f32, ...
// Errors go to stderr as one line ("myops_runner: ..."), with exit status 1; usage errors exit with 2.
#include <dlfcn.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

static_assert(std::endian::native == std::endian::little, "the input and output files are little-endian float32");

namespace {

struct Failure {
  std::string message;
};

// BEGIN load_library
// The package names our operators (myops::myadd, ...) but holds none of their code: the operators must be
// registered with the dispatcher before the package is loaded. dlopen runs the library's static initializers,
// which are its TORCH_LIBRARY and TORCH_LIBRARY_IMPL blocks, as torch.ops.load_library does in Python. That one
// opens it RTLD_LOCAL (ctypes.CDLL's default); RTLD_GLOBAL here also shows its symbols to libraries opened later.
// The package needs neither: it calls our operators by name, through the dispatcher, not by symbol.
void load_library(const std::string& path) {
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    throw Failure{std::string("cannot load ") + path + ": " + dlerror()};
  }
}
// END load_library

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    throw Failure{"cannot read " + path};
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) {
    if (!line.empty()) {
      lines.push_back(line);
    }
  }
  return lines;
}

// One line of inputs.txt ("x.f32 8 16") -> a float32 CPU tensor of those sizes holding the file's values.
at::Tensor read_tensor(const std::string& dir, const std::string& line) {
  std::istringstream fields(line);
  std::string name;
  fields >> name;
  std::vector<int64_t> sizes;
  for (int64_t size; fields >> size;) {
    sizes.push_back(size);
  }
  at::Tensor tensor = at::empty(sizes, at::kFloat);
  const std::string path = dir + "/" + name;
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) {
    throw Failure{"cannot read " + path};
  }
  const auto bytes = static_cast<int64_t>(file.tellg());
  if (bytes != tensor.numel() * 4) {
    std::ostringstream message;
    message << path << " holds " << bytes << " bytes, but sizes " << tensor.sizes() << " need "
            << tensor.numel() * 4;
    throw Failure{message.str()};
  }
  file.seekg(0);
  file.read(static_cast<char*>(tensor.data_ptr()), bytes);
  return tensor;
}

void write_tensor(const std::string& dir, const std::string& name, const at::Tensor& output, std::ostream& index) {
  if (output.scalar_type() != at::kFloat) {
    throw Failure{"output " + name + " is " + std::string(c10::toString(output.scalar_type())) +
                  "; this runner writes float32 only"};
  }
  const at::Tensor dense = output.contiguous();
  std::ofstream file(dir + "/" + name, std::ios::binary);
  file.write(static_cast<const char*>(dense.const_data_ptr()), dense.numel() * 4);
  if (!file) {
    throw Failure{"cannot write " + dir + "/" + name};
  }
  index << name;
  for (const int64_t size : dense.sizes()) {
    index << ' ' << size;
  }
  index << '\n';
}

int run(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--load" && i + 1 < args.size()) {
      load_library(args[++i]);
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 3) {
    std::cerr << "usage: myops_runner [--load LIBRARY.so]... PACKAGE.pt2 INPUT_DIR OUTPUT_DIR\n";
    return 2;
  }
  const std::string& package = positional[0];
  const std::string& input_dir = positional[1];
  const std::string& output_dir = positional[2];

  std::vector<at::Tensor> inputs;
  for (const std::string& line : read_lines(input_dir + "/inputs.txt")) {
    inputs.push_back(read_tensor(input_dir, line));
  }
  // BEGIN run
  // The loader unpacks the package, opens the model's compiled .so and gives it a proxy executor that holds one
  // operator handle per call of an operator AOTInductor did not compile (see the notebook).
  torch::inductor::AOTIModelPackageLoader loader(package);
  const std::vector<at::Tensor> outputs = loader.run(inputs);
  // END run

  std::ofstream index(output_dir + "/outputs.txt");
  for (size_t i = 0; i < outputs.size(); ++i) {
    write_tensor(output_dir, "output" + std::to_string(i) + ".f32", outputs[i], index);
  }
  std::cout << "myops_runner: " << inputs.size() << " inputs, " << outputs.size() << " output"
            << (outputs.size() == 1 ? "" : "s") << ", sizes";
  for (const at::Tensor& output : outputs) {
    std::cout << ' ' << output.sizes();
  }
  std::cout << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Failure& failure) {
    std::cerr << "myops_runner: " << failure.message << '\n';
  } catch (const c10::Error& error) {
    // what() would add a C++ backtrace of this machine; the message is what the user needs.
    std::cerr << "myops_runner: " << error.what_without_backtrace() << '\n';
  } catch (const std::exception& error) {
    std::cerr << "myops_runner: " << error.what() << '\n';
  }
  return 1;
}
