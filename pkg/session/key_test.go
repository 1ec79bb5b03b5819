package session

import (
	"errors"
	"testing"
)

func TestKeyConstructors(t *testing.T) {
	tests := []struct {
		name string
		make func() (Key, error)
		want Key
	}{
		{"p2p", func() (Key, error) { return P2P("wecom", "zhangsan") }, "p2p:wecom:zhangsan"},
		{"p2p allow_from form", func() (Key, error) { return P2P("wecom", "wecom:zhangsan") }, "p2p:wecom:zhangsan"},
		{"other channel same id", func() (Key, error) { return P2P("voice", "zhangsan") }, "p2p:voice:zhangsan"},
		{"group", func() (Key, error) { return Group("wecom", "wrOgAAA") }, "group:wecom:wrOgAAA"},
		{"thread", func() (Key, error) { return Thread("wecom", "chat1", "t9") }, "thread:wecom:chat1:t9"},
		{"colon escaped", func() (Key, error) { return Thread("admin", "a:b", "c%d") }, "thread:admin:a%3Ab:c%25d"},
		{"control escaped", func() (Key, error) { return P2P("admin", "x\ny") }, "p2p:admin:x%0Ay"},
		{"cjk kept", func() (Key, error) { return P2P("admin", "张三") }, "p2p:admin:张三"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.make()
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if _, err := ParseKey(string(got)); err != nil {
				t.Fatalf("ParseKey(%q): %v", got, err)
			}
		})
	}
}

func TestKeyConstructorErrors(t *testing.T) {
	for name, f := range map[string]func() (Key, error){
		"empty channel":   func() (Key, error) { return P2P("", "x") },
		"upper channel":   func() (Key, error) { return P2P("WeCom", "x") },
		"colon channel":   func() (Key, error) { return P2P("a:b", "x") },
		"empty sender":    func() (Key, error) { return P2P("wecom", "") },
		"only prefix":     func() (Key, error) { return P2P("wecom", "wecom:") },
		"empty thread":    func() (Key, error) { return Thread("wecom", "c", "") },
		"bad utf8":        func() (Key, error) { return Group("wecom", "\xff") },
		"too long sender": func() (Key, error) { return P2P("wecom", string(make([]byte, maxIDLen+1))) },
	} {
		if k, err := f(); !errors.Is(err, ErrBadKey) {
			t.Errorf("%s: got %q, %v; want ErrBadKey", name, k, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	good := map[string]KeyParts{
		"p2p:wecom:zhangsan":      {Kind: KindP2P, Channel: "wecom", ID: "zhangsan"},
		"group:voice:dev-1":       {Kind: KindGroup, Channel: "voice", ID: "dev-1"},
		"thread:wecom:c:t":        {Kind: KindThread, Channel: "wecom", ID: "c", Thread: "t"},
		"thread:admin:a%3Ab:c%25": {Kind: KindThread, Channel: "admin", ID: "a:b", Thread: "c%"},
	}
	for s, want := range good {
		got, err := ParseKey(s)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{
		"", "p2p", "p2p:wecom", "p2p:wecom:", "p2p::x", "p2p:wecom:a:b", "group:wecom:c:t",
		"thread:wecom:c", "dm:wecom:x", "P2P:wecom:x", "p2p:wecom:%3a", "p2p:wecom:%41",
		"p2p:wecom:%", "p2p:wecom:%3", "p2p:wecom:%ZZ", "p2p:wecom:a\nb", "p2p:wecom:\xff",
	} {
		if p, err := ParseKey(s); !errors.Is(err, ErrBadKey) {
			t.Errorf("ParseKey(%q) = %+v, %v; want ErrBadKey", s, p, err)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"p2p:wecom:zhangsan", "thread:admin:a%3Ab:c%25d", "group:x:%0A", "p2p:a:%", "thread:a:b:c:d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("ParseKey(%q) error %v is not ErrBadKey", s, err)
			}
			return
		}
		k, err := p.Key()
		if err != nil || string(k) != s {
			t.Fatalf("ParseKey(%q) = %+v, which re-encodes to %q, %v", s, p, k, err)
		}
	})
}

func FuzzKeyRoundTrip(f *testing.F) {
	f.Add("wecom", "zhangsan", "t")
	f.Add("admin", "a:b%c", "\x00")
	f.Fuzz(func(t *testing.T, channel, id, thread string) {
		for _, mk := range []func() (Key, error){
			func() (Key, error) { return P2P(channel, id) },
			func() (Key, error) { return Group(channel, id) },
			func() (Key, error) { return Thread(channel, id, thread) },
		} {
			k, err := mk()
			if err != nil {
				continue
			}
			p, err := ParseKey(string(k))
			if err != nil {
				t.Fatalf("ParseKey(%q) of a constructed key: %v", k, err)
			}
			if p.Channel != channel || p.ID != stripChannel(channel, id) {
				t.Fatalf("ParseKey(%q) = %+v; want channel %q id %q", k, p, channel, id)
			}
		}
	})
}
