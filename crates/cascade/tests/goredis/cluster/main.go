// go-redis's ClusterClient against three `cascade serve --cluster-enabled` primaries:
// slot discovery (CLUSTER SLOTS), MOVED handling, pipelines across nodes, a
// transaction in one slot, and CROSSSLOT.
// Usage: go run ./cluster HOST:PORT,HOST:PORT,...   (exits non-zero on any mismatch)
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func main() {
	addrs := strings.Split(os.Args[1], ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1]})
	defer rdb.Close()

	for i := 0; i < 500; i++ {
		if err := rdb.Set(ctx, fmt.Sprintf("go:%d", i), i, 0).Err(); err != nil {
			fail("set %d: %v", i, err)
		}
	}
	for i := 0; i < 500; i++ {
		v, err := rdb.Get(ctx, fmt.Sprintf("go:%d", i)).Int()
		if err != nil || v != i {
			fail("get %d: %d %v", i, v, err)
		}
	}
	masters := 0
	total := int64(0)
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		masters++
		total += n
		return err
	})
	if err != nil || masters != 3 || total < 500 {
		fail("masters: %d keys %d %v", masters, total, err)
	}
	// A pipeline whose commands go to all three nodes.
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			p.Incr(ctx, fmt.Sprintf("goctr:%d", i))
		}
		return nil
	})
	if err != nil || len(cmds) != 100 {
		fail("pipeline: %v", err)
	}
	// MULTI/EXEC in one slot.
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{gotx}a", "1", 0)
		p.Incr(ctx, "{gotx}a")
		return nil
	})
	if err != nil {
		fail("tx: %v", err)
	}
	if v, _ := rdb.Get(ctx, "{gotx}a").Result(); v != "2" {
		fail("tx result %q", v)
	}
	// Keys of two slots in one command.
	direct := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer direct.Close()
	if err := direct.MSet(ctx, "a", 1, "b", 2).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		fail("crossslot: %v", err)
	}
	// Every slot is covered (the test may have moved one slot before this runs).
	slots, err := rdb.ClusterSlots(ctx).Result()
	covered := 0
	for _, s := range slots {
		covered += s.End - s.Start + 1
	}
	if err != nil || len(slots) < 3 || covered != 16384 {
		fail("slots: %v %v", slots, err)
	}
	fmt.Println("ok")
}
