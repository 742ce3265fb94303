package tokens

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"

	"github.com/pkoukk/tiktoken-go"
)

// cl100kGz is OpenAI's cl100k_base.tiktoken (the BPE ranks, one
// "base64-token rank" line each, MIT licensed, as published at
// openaipublic.blob.core.windows.net/encodings and redistributed by
// github.com/pkoukk/tiktoken-go-loader), gzipped.
//
//go:embed cl100k_base.tiktoken.gz
var cl100kGz []byte

// cl100kSHA256 is the SHA-256 of the uncompressed table, as tiktoken
// itself checks it.
const cl100kSHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

// cl100kPattern and cl100kSpecial are cl100k_base's split pattern and
// special tokens, as tiktoken-go defines them.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

var cl100kSpecial = map[string]int{
	"<|endoftext|>":   100257,
	"<|fim_prefix|>":  100258,
	"<|fim_middle|>":  100259,
	"<|fim_suffix|>":  100260,
	"<|endofprompt|>": 100276,
}

// newCL100K builds the cl100k_base encoder from the embedded table with
// tiktoken-go's constructors, leaving its global loader alone, and returns
// its ranks too (the encoder's own map: read only).
func newCL100K() (*tiktoken.Tiktoken, map[string]int, error) {
	ranks, err := cl100kRanks()
	if err != nil {
		return nil, nil, err
	}
	special := make(map[string]int, len(cl100kSpecial))
	set := make(map[string]any, len(cl100kSpecial))
	for k, v := range cl100kSpecial {
		special[k], set[k] = v, true
	}
	bpe, err := tiktoken.NewCoreBPE(ranks, special, cl100kPattern)
	if err != nil {
		return nil, nil, fmt.Errorf("building the encoder: %w", err)
	}
	enc := &tiktoken.Encoding{Name: tiktoken.MODEL_CL100K_BASE, PatStr: cl100kPattern, MergeableRanks: ranks, SpecialTokens: special}
	return tiktoken.NewTiktoken(bpe, enc, set), ranks, nil
}

func cl100kRanks() (map[string]int, error) {
	zr, err := gzip.NewReader(bytes.NewReader(cl100kGz))
	if err != nil {
		return nil, fmt.Errorf("the embedded table: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("the embedded table: %w", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != cl100kSHA256 {
		return nil, fmt.Errorf("the embedded table's SHA-256 is %x, want %s", sum, cl100kSHA256)
	}
	ranks := make(map[string]int, 100256)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		sp := bytes.IndexByte(b, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("the embedded table: line %d has no rank", line)
		}
		tok, err := base64.StdEncoding.DecodeString(string(b[:sp]))
		if err != nil {
			return nil, fmt.Errorf("the embedded table: line %d: %w", line, err)
		}
		rank, err := strconv.Atoi(string(b[sp+1:]))
		if err != nil {
			return nil, fmt.Errorf("the embedded table: line %d: %w", line, err)
		}
		ranks[string(tok)] = rank
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("the embedded table: %w", err)
	}
	return ranks, nil
}
