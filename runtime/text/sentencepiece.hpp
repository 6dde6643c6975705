// What SentencePiece-style BPE vocabularies (Llama 2, Mistral, Gemma) add to the BPE core of
// runtime/text/tokenizer.hpp: how text is prepared before the merges, the <0xNN> byte tokens, and
// reading their pieces and llama.cpp's scores.
//
// [Note: SentencePiece-style BPE] SentencePiece writes a space as '▁' (U+2581) and, for Llama 2
// and Mistral, puts one in front of the text (its "dummy prefix"); a piece starts as its
// characters, and a character the vocabulary lacks becomes the tokens <0xNN> of its UTF-8 bytes
// (byte_fallback) or the unknown token (consecutive ones one token with fuse_unk). The merges are
// then BPE's, lowest rank first, as for byte-level vocabularies. The Tokenizer keeps each token as
// the bytes it decodes to ('▁' as a space, <0xNN> as its byte), so it prepares the text the other
// way round: '▁' in the text becomes a space (Hugging Face's normalizer makes both '▁'), and the
// prefix is a space; the byte tokens are kept apart, never matched as text. Decoding drops the one
// space the prefix put in front, as the families' decoders do.
//   The prefix, as each file spells it:
//     always:       Hugging Face's Prepend("▁") normalizer (Llama 2, Mistral) and llama.cpp's
//                   add_space_prefix: in front of every stretch between special tokens;
//     unless_space: the Metaspace pre-tokenizer's prepend_scheme "always": the same, except before
//                   a stretch that starts with a space;
//     first:        prepend_scheme "first" (Llama 2 and Mistral as transformers converts them now):
//                   only before the stretch that starts the text, unless it starts with a space;
//     none:         Gemma's (a Replace(" ", "▁") normalizer alone).
//   Invalid UTF-8 bytes are characters of their own, which no token holds: byte tokens or unknown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

struct TokenizerSpec;

struct SentencePieceRules {
  enum class Prefix { none, always, unless_space, first };
  Prefix prefix = Prefix::none;
  // Metaspace's split: a piece starts at each space, so no merge crosses one.
  bool split = false;
  // The ids of <0x00> .. <0xFF> for byte fallback; empty: characters without a token are unknown.
  std::vector<int32_t> byte_tokens;
};

// The text as the Tokenizer's SentencePiece-style tokens spell it ('▁' as a space, the prefix
// space where `rules` put one), in `buf`; `first`: the stretch starts the text.
std::string_view sentencepiece_text(std::string_view text, const SentencePieceRules& rules, bool first, std::string& buf);

// The length of the UTF-8 character at the start of s (1 for a byte that starts none).
size_t utf8_char_bytes(std::string_view s);

// Fills spec.tokens from a SentencePiece vocabulary's pieces ('▁' read as a space; `literal` ones,
// the special tokens, as they are) and spec.sentencepiece->byte_tokens from its <0xNN> pieces when
// `byte_fallback`; throws TokenizerError naming spec.source when byte fallback lacks any of them.
void read_sentencepiece_pieces(TokenizerSpec& spec, const std::vector<std::string>& pieces, const std::vector<bool>& literal,
                               bool byte_fallback);

// llama.cpp's SPM merges from the pieces' scores: any two adjacent symbols that make a token merge,
// the token of the highest score first (leftmost on a tie). As BPE merges over the spec's tokens
// (after read_sentencepiece_pieces): every cut of an ordinary token into two tokens, ranked by its
// score, equal scores sharing a rank.
void merges_from_scores(TokenizerSpec& spec, const std::vector<double>& scores, const std::vector<bool>& ordinary);

}  // namespace zt
