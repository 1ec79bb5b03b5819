package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/embed/embedtest"
	"agent/pkg/memory"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

// Chinese facts under the English model: doctor says so and how to fetch
// the Chinese one; with a Chinese vocabulary, or English facts, it is
// quiet.
func TestLanguageMismatchWarns(t *testing.T) {
	e := baseEnv(t, "", nil)
	ctx := context.Background()
	os.MkdirAll(e.Config.Agent.StateDir, 0o750)
	st := storetest.OpenAt(t, filepath.Join(e.Config.Agent.StateDir, store.FileName))
	m := memory.New(st.DB(), memory.Config{}, nil, nil)
	for i := range 30 {
		m.Add(ctx, "wecom:alice", memory.Input{Text: fmt.Sprintf("用户每周%d开例会，地点在三楼会议室", i)})
	}
	for i := range 10 {
		m.Add(ctx, "wecom:bob", memory.Input{Text: fmt.Sprintf("The user parks in bay %d", i)})
	}
	m.Close()
	st.Close()

	en := t.TempDir()
	if err := embedtest.WriteTokenizer(filepath.Join(en, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(en, "model.onnx"), []byte("x"), 0o600)
	e.Config.Embedding.ModelDir = en
	r := e.checkFacts(ctx)
	if r.Level != Warn || !strings.Contains(r.Detail, "30 of the last 40 facts are Chinese") || !strings.Contains(r.Fix, "fetch-models.sh bge-zh") || !strings.Contains(r.Fix, "bge-small-zh-v1.5") {
		t.Fatalf("Chinese facts, English model: %+v", r)
	}

	// A Chinese vocabulary.
	zh := t.TempDir()
	vocab := map[string]int{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
	for _, c := range "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞" {
		vocab[string(c)] = len(vocab)
	}
	b, _ := json.Marshal(map[string]any{"model": map[string]any{"type": "WordPiece", "vocab": vocab}})
	os.WriteFile(filepath.Join(zh, "tokenizer.json"), b, 0o600)
	os.WriteFile(filepath.Join(zh, "model.onnx"), []byte("x"), 0o600)
	e.Config.Embedding.ModelDir = zh
	if r := e.checkFacts(ctx); r.Level != OK {
		t.Fatalf("Chinese model: %+v", r)
	}
}
