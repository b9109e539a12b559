// A plain C++ program, no Python: loads a .pt2 with AOTIModelPackageLoader
// and runs it, the way a serving binary would.
//
//   load_package MODEL.pt2 INPUTS.pt OUTPUTS.pt [THREADS]
//
// INPUTS.pt is torch.save([t0, t1, ...]); OUTPUTS.pt receives the outputs of
// the first run as a tuple, for the test to compare against Python. With
// THREADS > 1, that many threads run the same loaded model at once.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/serialize.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>
#include <vector>

namespace {
std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: load_package MODEL.pt2 INPUTS.pt OUTPUTS.pt [THREADS]\n";
    return 2;
  }
  const int threads = argc > 4 ? std::stoi(argv[4]) : 1;
  try {
    std::vector<at::Tensor> inputs;
    for (const auto& v : torch::pickle_load(read_file(argv[2])).toList()) {
      inputs.push_back(v.get().toTensor());
    }
    torch::inductor::AOTIModelPackageLoader loader(argv[1], "model", false,
                                                   static_cast<size_t>(threads));
    const std::vector<at::Tensor> outputs = loader.run(inputs);
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) {
      pool.emplace_back([&loader, &inputs] { loader.run(inputs); });
    }
    for (auto& t : pool) t.join();

    // A tuple pickles as a plain Python tuple; lists carry type tags that
    // torch.load(weights_only=True) refuses.
    const std::vector<c10::IValue> items(outputs.begin(), outputs.end());
    const std::vector<char> bytes = torch::pickle_save(c10::ivalue::Tuple::create(items));
    std::ofstream(argv[3], std::ios::binary).write(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    std::cerr << "load_package: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
