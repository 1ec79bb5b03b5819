package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"agent/pkg/fleet"
)

// checkFleet connects to the fleet's NATS as the daemon does, checks that
// JetStream answers and the fleet's stream is there, and reads the boxes'
// heartbeats: this box's must be fresh when the daemon runs.
func (e Env) checkFleet(ctx context.Context) Result {
	f := e.Config.Fleet
	if !f.Enabled {
		return Result{Level: OK, Detail: "disabled (a single box)"}
	}
	opts := append([]nats.Option{nats.Name("agentctl doctor"), nats.Timeout(5 * time.Second), nats.MaxReconnects(0)},
		fleet.Auth{CredentialsFile: f.CredentialsFile, Token: f.Token, TLSCAFile: f.TLSCAFile, TLSCertFile: f.TLSCertFile, TLSKeyFile: f.TLSKeyFile}.Options()...)
	nc, err := nats.Connect(f.NATSURL, opts...)
	if err != nil {
		return Result{Level: Fail, Detail: "cannot connect to NATS: " + err.Error(),
			Fix: "check fleet.nats_url and the credentials; is nats-server running with JetStream (-js) and reachable from this box?"}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return Result{Level: Fail, Detail: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return Result{Level: Fail, Detail: "NATS answers but JetStream does not: " + err.Error(), Fix: "enable JetStream on the server (nats-server -js, or jetstream {} in its config)"}
	}
	detail := fmt.Sprintf("connected to %s as box %s", nc.ConnectedUrlRedacted(), f.Box)
	if f.Ingress {
		detail += " (the ingress)"
	}
	if _, err := js.Stream(ctx, fleet.StreamName); errors.Is(err, jetstream.ErrStreamNotFound) {
		return Result{Level: Warn, Detail: detail + "; the fleet's stream does not exist yet (the first box to start creates it)", Fix: "systemctl start agent"}
	} else if err != nil {
		return Result{Level: Fail, Detail: detail + "; stream: " + err.Error()}
	}
	kv, err := js.KeyValue(ctx, fleet.BoxesBucket)
	if err != nil {
		return Result{Level: Warn, Detail: detail + "; no heartbeats yet: " + err.Error()}
	}
	keys, _ := kv.Keys(ctx)
	var boxes []string
	self := false
	for _, k := range keys {
		en, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var b fleet.Beat
		json.Unmarshal(en.Value(), &b)
		age := time.Since(b.At)
		state := "up"
		if age > 3*fleet.DefaultHeartbeat {
			state = "silent " + age.Round(time.Second).String()
		}
		boxes = append(boxes, k+" "+state)
		if k == f.Box && state == "up" {
			self = true
		}
	}
	detail += "; boxes: " + strings.Join(boxes, ", ")
	if !self {
		return Result{Level: Warn, Detail: detail + "; this box has no fresh heartbeat", Fix: "systemctl start agent (or journalctl -u agent -g fleet)"}
	}
	return Result{Level: OK, Detail: detail}
}
