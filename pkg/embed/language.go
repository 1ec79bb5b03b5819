package embed

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"unicode"
)

// HanShare is the share of text's letters that are Chinese characters.
func HanShare(text string) float64 {
	letters, han := 0, 0
	for _, r := range text {
		if !unicode.IsLetter(r) {
			continue
		}
		letters++
		if unicode.Is(unicode.Han, r) {
			han++
		}
	}
	if letters == 0 {
		return 0
	}
	return float64(han) / float64(letters)
}

// VocabHanShare is the share of a tokenizer.json's vocabulary that holds
// Chinese characters: about 0.1 for English BERT vocabularies (bge-small-en:
// single characters only, so Chinese text embeds poorly), most of it for
// Chinese ones (bge-small-zh).
func VocabHanShare(tokenizerPath string) (float64, error) {
	f, err := os.Open(tokenizerPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var tj struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.NewDecoder(io.LimitReader(f, 64<<20)).Decode(&tj); err != nil {
		return 0, fmt.Errorf("embed: %s: %w", tokenizerPath, err)
	}
	if len(tj.Model.Vocab) == 0 {
		return 0, fmt.Errorf("embed: %s: no WordPiece vocabulary", tokenizerPath)
	}
	han := 0
	for tok := range tj.Model.Vocab {
		for _, r := range tok {
			if unicode.Is(unicode.Han, r) {
				han++
				break
			}
		}
	}
	return float64(han) / float64(len(tj.Model.Vocab)), nil
}
