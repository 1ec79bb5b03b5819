package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// SkillInfo is one skill for `agentctl skills list`.
type SkillInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Source      string   `json:"source"` // bundled | installed | workspace
	Dir         string   `json:"dir"`
	Offered     bool     `json:"offered"` // in the prompt's index, usable
	Disabled    bool     `json:"disabled,omitempty"`
	Missing     []string `json:"missing,omitempty"` // requirements this box lacks
	Error       string   `json:"error,omitempty"`
	Shadows     []string `json:"shadows,omitempty"` // lower-precedence copies it hides
	Users       []string `json:"users,omitempty"`   // who may use it; empty: everyone
}

// SkillInstall is what an install wrote.
type SkillInstall struct {
	Name     string      `json:"name"`
	SHA256   string      `json:"sha256"` // of the archive as received
	Files    []SkillFile `json:"files"`
	Replaced bool        `json:"replaced"`
}

// SkillFile is one installed file.
type SkillFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// SkillsBackend is the skills part of the admin API.
type SkillsBackend interface {
	SkillsList(ctx context.Context) ([]SkillInfo, error)
	// InstallSkill installs the tar (or tar.gz) archive read from r.
	InstallSkill(ctx context.Context, r io.Reader) (SkillInstall, error)
	SetSkillEnabled(ctx context.Context, name string, on bool) (SkillInfo, error)
}

// ErrBadArchive is returned (wrapped) for an archive install refuses.
var ErrBadArchive = errors.New("refused")

// MaxSkillArchive bounds an install's request body.
const MaxSkillArchive = 80 << 20

func registerSkills(mux *http.ServeMux, b Backend) {
	sk := optional[SkillsBackend](b, "skills")
	mux.HandleFunc("GET /v1/skills", sk(func(w http.ResponseWriter, r *http.Request, s SkillsBackend) {
		list, err := s.SkillsList(r.Context())
		if list == nil {
			list = []SkillInfo{}
		}
		answer(w, list, err)
	}))
	mux.HandleFunc("POST /v1/skills/install", sk(func(w http.ResponseWriter, r *http.Request, s SkillsBackend) {
		in, err := s.InstallSkill(r.Context(), http.MaxBytesReader(w, r.Body, MaxSkillArchive))
		if errors.Is(err, ErrBadArchive) {
			writeError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		answer(w, in, err)
	}))
	for _, action := range []string{"enable", "disable"} {
		mux.HandleFunc("POST /v1/skills/{name}/"+action, sk(func(w http.ResponseWriter, r *http.Request, s SkillsBackend) {
			info, err := s.SetSkillEnabled(r.Context(), r.PathValue("name"), action == "enable")
			answer(w, info, err)
		}))
	}
}

// SkillsList lists every skill found.
func (c *Client) SkillsList(ctx context.Context) ([]SkillInfo, error) {
	return call[[]SkillInfo](ctx, c, http.MethodGet, "/v1/skills", nil)
}

// SetSkillEnabled enables or disables a skill.
func (c *Client) SetSkillEnabled(ctx context.Context, name string, on bool) (SkillInfo, error) {
	action := "disable"
	if on {
		action = "enable"
	}
	return call[SkillInfo](ctx, c, http.MethodPost, "/v1/skills/"+url.PathEscape(name)+"/"+action, nil)
}

// InstallSkill sends a tar or tar.gz archive to be installed.
func (c *Client) InstallSkill(ctx context.Context, archive io.Reader) (SkillInstall, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out SkillInstall
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/v1/skills/install", archive)
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	if err := c.send(req, &out); err != nil {
		return out, fmt.Errorf("admin: install skill: %w", err)
	}
	return out, nil
}
