// go-redis against `cascade serve`: pub/sub (channel and pattern subscriptions, messages
// from another connection, unsubscribe) and numbered databases (a client per DB).
// Usage: go run . HOST:PORT   (exits non-zero with a message on any mismatch)
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func main() {
	addr := os.Args[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	sub := rdb.Subscribe(ctx, "orders")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		fail("subscribe: %v", err)
	}
	if err := sub.PSubscribe(ctx, "events.*"); err != nil {
		fail("psubscribe: %v", err)
	}
	ch := sub.Channel()
	// Wait until both subscriptions are registered server-side.
	for {
		n, err := rdb.PubSubNumPat(ctx).Result()
		if err != nil {
			fail("numpat: %v", err)
		}
		if n == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < 100; i++ {
		if n, err := rdb.Publish(ctx, "orders", fmt.Sprintf("o%d", i)).Result(); err != nil || n != 1 {
			fail("publish orders: %d %v", n, err)
		}
	}
	if n, err := rdb.Publish(ctx, "events.login", "alice").Result(); err != nil || n != 1 {
		fail("publish events: %d %v", n, err)
	}
	for i := 0; i < 100; i++ {
		m := <-ch
		if m.Channel != "orders" || m.Payload != fmt.Sprintf("o%d", i) {
			fail("message %d: %+v", i, m)
		}
	}
	m := <-ch
	if m.Pattern != "events.*" || m.Channel != "events.login" || m.Payload != "alice" {
		fail("pmessage: %+v", m)
	}
	if err := sub.Unsubscribe(ctx, "orders"); err != nil {
		fail("unsubscribe: %v", err)
	}

	// Numbered databases: one client per DB, keys do not leak between them.
	db3 := redis.NewClient(&redis.Options{Addr: addr, DB: 3})
	defer db3.Close()
	if err := rdb.Set(ctx, "k", "zero", 0).Err(); err != nil {
		fail("set db0: %v", err)
	}
	if err := db3.Set(ctx, "k", "three", 0).Err(); err != nil {
		fail("set db3: %v", err)
	}
	if v, _ := rdb.Get(ctx, "k").Result(); v != "zero" {
		fail("db0 k = %q", v)
	}
	if v, _ := db3.Get(ctx, "k").Result(); v != "three" {
		fail("db3 k = %q", v)
	}
	fmt.Println("ok")
}
