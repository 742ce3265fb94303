// Package tinymodel writes a tiny, valid llama-architecture GGUF model that a
// real `ollama serve` (and llama.cpp) loads and runs, so memstack's Ollama
// path can be tested end to end on a machine that cannot download a model.
//
// Design: the weights are synthetic and built by hand so that decoding —
// greedy or sampled, whatever the prompt — always answers with the fixed
// phrase Answer ("Hello from tiny model!", 5 tokens) followed by
// end-of-sequence. Embeddings are one-hot on a few "phrase" dimensions plus
// small seeded noise, the transformer blocks carry small seeded random
// weights (so attention and the MLP really run) and output.weight encodes a
// next-token table. Everything is derived from a fixed seed with math/rand,
// whose generator is frozen by the Go 1 compatibility promise, so the file is
// byte-identical on every run and every machine: Size bytes with SHA-256
// SHA256. The standard library is all it needs.
//
// The model: 2 layers, hidden size 64, 4 heads, context 2048, all tensors
// F32, and a SentencePiece-style ("llama") vocabulary of 358 tokens with
// byte fallback (<unk>, <s>, </s>, the 256 byte tokens, "▁", the printable
// ASCII characters and four phrase tokens the input tokenizer can never
// produce), so any UTF-8 input tokenizes. Under Ollama's JSON mode with
// greedy decoding it answers {"Hello from tiny model!":"Hello from tiny model!"}.
//
// Ollama ignores the GGUF's chat template; create the model with Template
// and the parameters num_ctx 512, num_thread 1 and stop ["</s>"] (see
// internal/testsvc).
package tinymodel

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
)

// Answer is what the tiny model answers to any prompt.
const Answer = "Hello from tiny model!"

// Size is the length in bytes of the GGUF file Write produces.
const Size = 522048

// SHA256 is the hex SHA-256 digest of the GGUF file Write produces.
const SHA256 = "211f6d806bf6126c5b51836dab5a2b8f61b02e940335e676f929f1f799459d05"

// Template is the Ollama prompt template (Go text/template syntax) to create
// the model with: "role: content" lines, then "assistant:".
const Template = "{{- if .System }}system: {{ .System }}\n{{ end }}{{- range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}assistant:"

// GGUF metadata value types.
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
)

// ggmlF32 is the GGML tensor type of every tensor here.
const ggmlF32 = 0

// llama.cpp token types.
const (
	tokNormal  = 1
	tokUnknown = 2
	tokControl = 3
	tokByte    = 6
)

const alignment = 32

// Model hyper-parameters (tiny on purpose).
const (
	nEmbd   = 64
	nLayer  = 2
	nHead   = 4
	nHeadKV = 4
	nFF     = 128
	nCtx    = 2048
	headDim = nEmbd / nHead
	seed    = 1
)

var phrase = []string{"Hello", "▁from", "▁tiny", "▁model!"}

type kv struct {
	key string
	val any // string, uint32, float32, bool, []string, []float32, []int32
}

type tensor struct {
	name string
	dims []uint64 // ne0 (fastest varying) first, as GGUF stores them
	data []float32
}

// WriteFile writes the model to path (created or truncated, mode 0644).
func WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("tinymodel: creating model file: %w", err)
	}
	bw := bufio.NewWriter(f)
	if err := Write(bw); err != nil {
		_ = f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("tinymodel: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("tinymodel: closing %s: %w", path, err)
	}
	return nil
}

// Bytes returns the model file's content (Size bytes).
func Bytes() []byte {
	var b bytes.Buffer
	b.Grow(Size)
	_ = Write(&b) // a bytes.Buffer never fails a write
	return b.Bytes()
}

// Write writes the model, a GGUF v3 file of Size bytes, to w. It is
// deterministic: every call writes the same bytes.
func Write(w io.Writer) error {
	meta, ts := build()
	if err := writeGGUF(w, meta, ts); err != nil {
		return fmt.Errorf("tinymodel: writing GGUF: %w", err)
	}
	return nil
}

// build returns the model's metadata and tensors.
func build() ([]kv, []tensor) {
	rng := rand.New(rand.NewSource(seed))

	// ---- vocabulary ----
	var tokens []string
	var scores []float32
	var types []int32
	index := map[string]int{}
	add := func(s string, score float32, typ int32) int {
		tokens = append(tokens, s)
		scores = append(scores, score)
		types = append(types, typ)
		index[s] = len(tokens) - 1
		return len(tokens) - 1
	}
	add("<unk>", 0, tokUnknown) // 0
	add("<s>", 0, tokControl)   // 1
	eos := add("</s>", 0, tokControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, tokByte)
	}
	add("▁", -1, tokNormal)
	for c := 0x21; c <= 0x7e; c++ {
		add(string(rune(c)), -2, tokNormal)
	}
	phraseIDs := make([]int, len(phrase))
	for i, p := range phrase {
		phraseIDs[i] = add(p, -10, tokNormal)
	}
	nVocab := len(tokens)

	// ---- tensors ----
	randn := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}

	// Dimension 0 marks "any non-phrase token"; dimension k+1 marks phrase
	// token k. Dimensions past the phrase carry seeded noise so that
	// different inputs give different embeddings.
	np := len(phrase)
	embd := make([]float32, nVocab*nEmbd)
	isPhrase := map[int]int{}
	for k, id := range phraseIDs {
		isPhrase[id] = k
	}
	for t := 0; t < nVocab; t++ {
		row := embd[t*nEmbd : (t+1)*nEmbd]
		if k, ok := isPhrase[t]; ok {
			row[k+1] = 1
		} else {
			row[0] = 1
		}
		for d := np + 1; d < nEmbd; d++ {
			row[d] = float32(rng.NormFloat64() * 0.1)
		}
	}
	// output.weight row j is the direction that selects token j next:
	// non-phrase -> phrase[0], phrase[k] -> phrase[k+1], last -> </s>.
	const s = 5
	outW := make([]float32, nVocab*nEmbd)
	outW[phraseIDs[0]*nEmbd+0] = s
	for k := 0; k+1 < np; k++ {
		outW[phraseIDs[k+1]*nEmbd+(k+1)] = s
	}
	outW[eos*nEmbd+np] = s
	// Runner-up preferences, far below the phrase (so free text is
	// unaffected) but decisive when a JSON grammar masks the phrase: greedy
	// decoding under format "json" then yields
	// {"Hello from tiny model!":"Hello from tiny model!"} and stops.
	outW[index[`"`]*nEmbd+0] = 2.0
	outW[index[":"]*nEmbd+0] = 1.5
	outW[index["}"]*nEmbd+0] = 1.0
	outW[eos*nEmbd+0] = 0.5
	outW[index[`"`]*nEmbd+np] = 2.0 // close a string after the phrase

	ts := []tensor{
		{"token_embd.weight", []uint64{nEmbd, uint64(nVocab)}, embd},
		{"output_norm.weight", []uint64{nEmbd}, ones(nEmbd)},
		{"output.weight", []uint64{nEmbd, uint64(nVocab)}, outW},
	}
	const w = 0.02
	for l := 0; l < nLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor{p + "attn_norm.weight", []uint64{nEmbd}, ones(nEmbd)},
			tensor{p + "attn_q.weight", []uint64{nEmbd, nEmbd}, randn(nEmbd*nEmbd, w)},
			tensor{p + "attn_k.weight", []uint64{nEmbd, nHeadKV * headDim}, randn(nEmbd*nHeadKV*headDim, w)},
			tensor{p + "attn_v.weight", []uint64{nEmbd, nHeadKV * headDim}, randn(nEmbd*nHeadKV*headDim, w)},
			tensor{p + "attn_output.weight", []uint64{nEmbd, nEmbd}, randn(nEmbd*nEmbd, w)},
			tensor{p + "ffn_norm.weight", []uint64{nEmbd}, ones(nEmbd)},
			tensor{p + "ffn_gate.weight", []uint64{nEmbd, nFF}, randn(nEmbd*nFF, w)},
			tensor{p + "ffn_up.weight", []uint64{nEmbd, nFF}, randn(nEmbd*nFF, w)},
			tensor{p + "ffn_down.weight", []uint64{nFF, nEmbd}, randn(nFF*nEmbd, w)},
		)
	}

	// Chat template (Jinja, informational; Ollama uses Template instead).
	chatTemplate := "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}assistant:"

	meta := []kv{
		{"general.architecture", "llama"},
		{"general.name", "tiny"},
		{"general.file_type", uint32(0)}, // all F32
		{"general.alignment", uint32(alignment)},
		{"llama.context_length", uint32(nCtx)},
		{"llama.embedding_length", uint32(nEmbd)},
		{"llama.block_count", uint32(nLayer)},
		{"llama.feed_forward_length", uint32(nFF)},
		{"llama.attention.head_count", uint32(nHead)},
		{"llama.attention.head_count_kv", uint32(nHeadKV)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.vocab_size", uint32(nVocab)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(eos)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.chat_template", chatTemplate},
	}
	return meta, ts
}

// counter counts the bytes written through it, for alignment padding.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ggufWriter writes little-endian GGUF primitives and remembers the first
// error, so the layout code below reads as a list of fields.
type ggufWriter struct {
	c   *counter
	err error
}

func (g *ggufWriter) put(v any) {
	if g.err == nil {
		g.err = binary.Write(g.c, binary.LittleEndian, v)
	}
}

func (g *ggufWriter) str(s string) {
	g.put(uint64(len(s)))
	if g.err == nil {
		_, g.err = io.WriteString(g.c, s)
	}
}

func (g *ggufWriter) raw(p []byte) {
	if g.err == nil {
		_, g.err = g.c.Write(p)
	}
}

func writeGGUF(w io.Writer, meta []kv, ts []tensor) error {
	g := &ggufWriter{c: &counter{w: w}}
	g.raw([]byte("GGUF"))
	g.put(uint32(3)) // version
	g.put(uint64(len(ts)))
	g.put(uint64(len(meta)))

	for _, m := range meta {
		g.str(m.key)
		switch v := m.val.(type) {
		case string:
			g.put(uint32(ggufString))
			g.str(v)
		case uint32:
			g.put(uint32(ggufUint32))
			g.put(v)
		case float32:
			g.put(uint32(ggufFloat32))
			g.put(v)
		case bool:
			var b uint8
			if v {
				b = 1
			}
			g.put(uint32(ggufBool))
			g.put(b)
		case []string:
			g.put(uint32(ggufArray))
			g.put(uint32(ggufString))
			g.put(uint64(len(v)))
			for _, s := range v {
				g.str(s)
			}
		case []float32:
			g.put(uint32(ggufArray))
			g.put(uint32(ggufFloat32))
			g.put(uint64(len(v)))
			g.put(v)
		case []int32:
			g.put(uint32(ggufArray))
			g.put(uint32(ggufInt32))
			g.put(uint64(len(v)))
			g.put(v)
		default:
			return fmt.Errorf("metadata %s: unsupported type %T", m.key, v)
		}
	}

	// Tensor infos; offsets are relative to the start of the data section.
	var off uint64
	offsets := make([]uint64, len(ts))
	for i, t := range ts {
		n := uint64(1)
		for _, d := range t.dims {
			n *= d
		}
		if n != uint64(len(t.data)) {
			return fmt.Errorf("tensor %s: dims give %d elements, data has %d", t.name, n, len(t.data))
		}
		offsets[i] = off
		off += pad(n*4, alignment)
	}
	for i, t := range ts {
		g.str(t.name)
		g.put(uint32(len(t.dims)))
		g.put(t.dims)
		g.put(uint32(ggmlF32))
		g.put(offsets[i])
	}

	// Pad to the alignment, then the tensor data, each padded likewise.
	g.raw(make([]byte, pad(uint64(g.c.n), alignment)-uint64(g.c.n)))
	for _, t := range ts {
		buf := make([]byte, 4*len(t.data))
		for i, v := range t.data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		g.raw(buf)
		n := uint64(len(buf))
		g.raw(make([]byte, pad(n, alignment)-n))
	}
	return g.err
}

func pad(n, a uint64) uint64 { return (n + a - 1) / a * a }
