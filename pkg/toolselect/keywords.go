package toolselect

import (
	"strings"
	"unicode"

	"agent/pkg/tools"
)

// aliases are words users say for what a built-in tool does, besides the
// words of its name and description: English and Chinese (WeCom offices
// mostly write Chinese; the descriptions are English). Read-only.
var aliases = map[string]string{
	"exec":            "run command shell script python compute calculate program terminal 运行 执行 命令 脚本 计算 程序",
	"message":         "tell notify send text colleague 通知 告诉 发消息 转告",
	"read_file":       "open show content 打开 读取 查看 内容 文件",
	"write_file":      "save create note 保存 写入 新建 记录 文件",
	"edit_file":       "change modify replace fix 修改 编辑 替换",
	"list_files":      "folder directory files 文件夹 目录 列出 文件",
	"delete_file":     "delete remove erase clean full space quota 删除 删掉 清理 空间 满了",
	"schedule":        "remind reminder timer alarm every daily weekly tomorrow later 提醒 定时 日程 每天 每周 明天 闹钟 稍后",
	"list_schedules":  "reminders jobs scheduled 提醒 定时 任务 日程",
	"remove_schedule": "cancel stop reminder delete job 取消 删除 提醒 定时",
	"send_image":      "picture photo image 图片 照片 发图",
	"send_file":       "attachment document send 附件 发文件 发送 文件",
	"send_video":      "video clip send 视频 发送",
	"send_link":       "link url article 链接 网址 文章",
	"trim_video":      "cut clip video shorten 剪辑 剪 截取 视频",
	"add_bgm":         "music background soundtrack video 配乐 背景音乐 音乐",
	"generate_video":  "slideshow video images narration 生成 视频 幻灯片 旁白",
	"web_search":      "search google internet online news latest look up find weather price stock 搜索 查 查询 网上 新闻 最新 天气 价格 股价",
	"web_fetch":       "url link page website open read 网页 链接 网址 打开",
	"search_memory":   "remember recall know said earlier 记得 记忆 之前 说过",
	"recall":          "remember earlier conversation history 记得 之前 历史 聊过",
	"correct_memory":  "wrong correct update fact 不对 纠正 更正 记错",
	"forget_memory":   "forget delete fact 忘记 忘掉 删除 记忆",
	"self_check":      "health status problem check broken 健康 状态 检查 故障",
	"diagnose":        "why failed error wrong went 为什么 失败 错误 出错",
	"create_tool":     "new tool automate make 新工具 创建 工具 自动化",
	"read_document":   "pdf word docx excel xlsx pptx document report 文档 报告 表格 读",
	"get_skill":       "skill how instructions 技能 说明",
	"reload_mcp":      "mcp server reload 重新加载 服务器",
}

// stop are words that say nothing about which tool is meant. Read-only.
var stop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or of to in on at for with from by is are was were be been it its this that these
those i me my you your we our he she they them what which who whom how can could would should will shall do does did
please pls hi hello hey thanks thank ok okay yes no not just also some any all one two get give make let use tool tools
file files` /* too common in descriptions to tell tools apart */) {
		m[w] = true
	}
	return m
}()

// queryTerms are the message's distinct words, lower case, stemmed, stop
// words left out.
func queryTerms(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range words(text) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// words splits text into stemmed lower-case Latin words and digits
// (Chinese is matched by containment in keywordScore).
func words(text string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)))
	}) {
		if len(f) < 2 || stop[f] {
			continue
		}
		out = append(out, stem(f))
	}
	return out
}

// stem takes common English endings off, enough for "reminders" to meet
// "reminder" and "searching" "search".
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// toolTerms are a tool's words by weight, computed once per description.
type toolTerms struct {
	name, alias, desc map[string]bool
	cjk               []string        // Chinese aliases, matched by containment
	grams             map[string]bool // character pairs of the description's Chinese
}

// hanGrams are the pairs of adjacent Chinese characters in text: Chinese
// has no spaces to split words at, and two characters are most words.
func hanGrams(text string) []string {
	var out []string
	var prev rune
	for _, r := range text {
		if unicode.Is(unicode.Han, r) {
			if prev != 0 {
				out = append(out, string([]rune{prev, r}))
			}
			prev = r
		} else {
			prev = 0
		}
	}
	return out
}

func termsOf(t tools.Tool) toolTerms {
	tt := toolTerms{name: map[string]bool{}, alias: map[string]bool{}, desc: map[string]bool{}}
	for _, w := range words(strings.NewReplacer("_", " ", "-", " ").Replace(t.Name)) {
		tt.name[w] = true
	}
	for _, a := range strings.Fields(aliases[t.Name]) {
		if a[0] < unicode.MaxASCII {
			tt.alias[stem(a)] = true
		} else {
			tt.cjk = append(tt.cjk, a)
		}
	}
	for _, w := range words(t.Description) {
		tt.desc[w] = true
	}
	tt.grams = map[string]bool{}
	for _, g := range hanGrams(t.Description) {
		tt.grams[g] = true
	}
	return tt
}

// keywordScore is how well text's terms match a tool: a word of its name
// counts 3, an alias 2 (a Chinese alias found in the text too); each
// query term counts once. The description counts least and is capped: a
// word of it 1, at most 2 in all, and its Chinese character pairs found in
// the text 1 each, at most 3, so that a description stuffed with every
// word people say (an MCP server's, or a user's runtime tool) cannot push
// the tools named for the job out of the offer. The sum is scaled into
// [0, 1].
func keywordScore(text string, terms []string, tt toolTerms) float64 {
	score, desc := 0, 0
	for _, q := range terms {
		switch {
		case tt.name[q]:
			score += 3
		case tt.alias[q]:
			score += 2
		case tt.desc[q]:
			desc++
		}
	}
	for _, a := range tt.cjk {
		if strings.Contains(text, a) {
			score += 2
		}
	}
	grams := 0
	if len(tt.grams) > 0 {
		seen := map[string]bool{}
		for _, g := range hanGrams(text) {
			if tt.grams[g] && !seen[g] {
				seen[g] = true
				grams++
			}
		}
	}
	score += min(desc, 2) + min(grams, 3)
	return min(1, float64(score)/6)
}
