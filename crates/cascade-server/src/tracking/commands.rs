//! The connection's side of client-side caching: its tracking options ([`Local`]) and
//! the CLIENT subcommands `TRACKING`, `CACHING`, `GETREDIR` and `TRACKINGINFO`, with
//! Redis 7.0's checks, error texts and reply shapes. `cmd/server/conn.rs` hands them over
//! ([`client_command`]).
//!
//! [`Local`] is owned by the connection's worker (no lock); the shared side (table,
//! prefixes, redirect, broken flag) is in `Tracking` (`mod.rs`).

use super::Mode;
use crate::cmd::{arity_error, int_arg, is, Client, Ctx, Spec};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Store;

/// One connection's tracking options.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent options, as Redis's client flags"
)]
pub(crate) struct Local {
    /// `CLIENT TRACKING ON`.
    pub(crate) on: bool,
    /// BCAST.
    pub(crate) bcast: bool,
    /// OPTIN.
    pub(crate) optin: bool,
    /// OPTOUT.
    pub(crate) optout: bool,
    /// NOLOOP.
    pub(crate) noloop: bool,
    /// `CLIENT CACHING YES` (OPTIN) or `NO` (OPTOUT) given for the next command.
    pub(crate) caching: bool,
    /// REDIRECT target (0: none).
    pub(crate) redirect: u64,
}

impl Local {
    /// True if the keys of a read-only command run now are remembered for this client.
    pub(crate) fn remembers(&self) -> bool {
        let opted_out = if self.optin {
            !self.caching
        } else {
            self.optout && self.caching
        };
        self.on && !self.bcast && !opted_out
    }
}

/// Runs `CLIENT TRACKING|CACHING|GETREDIR|TRACKINGINFO`; `None` for any other
/// subcommand.
pub(crate) fn client_command(ctx: &mut Ctx<'_>, c: &Command) -> Option<CmdResult<()>> {
    let sub = c.arg(1);
    let (name, ok_arity) = if is(sub, "tracking") {
        ("tracking", c.len() >= 3)
    } else if is(sub, "caching") {
        ("caching", c.len() == 3)
    } else if is(sub, "getredir") {
        ("getredir", c.len() == 2)
    } else if is(sub, "trackinginfo") {
        ("trackinginfo", c.len() == 2)
    } else {
        return None;
    };
    if !ok_arity {
        return Some(Err(CmdError::Msg(arity_error(&format!("client|{name}")))));
    }
    Some(match name {
        "tracking" => tracking(ctx, c),
        "caching" => caching(ctx, c),
        "getredir" => {
            let t = ctx.client.tracking;
            let r = if t.on {
                i64::try_from(t.redirect).unwrap_or(i64::MAX)
            } else {
                -1
            };
            reply::int(ctx.out, r);
            Ok(())
        }
        _ => {
            trackinginfo(ctx);
            Ok(())
        }
    })
}

fn err(msg: &str) -> CmdResult<()> {
    Err(CmdError::err(msg))
}

/// True if one of `a`, `b` starts with the other.
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Redis's rule for BCAST prefixes: none may be a prefix of another, among those
/// given and against those the client has.
fn check_prefixes(existing: &[Vec<u8>], prefixes: &[Vec<u8>]) -> CmdResult<()> {
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlaps(e, p)) {
            return err(&format!(
                "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(e)
            ));
        }
        if let Some(q) = prefixes[i + 1..].iter().find(|q| overlaps(p, q)) {
            return err(&format!(
                "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(q)
            ));
        }
    }
    Ok(())
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN] [OPTOUT] [NOLOOP]`.
fn tracking(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let (mut redirect, mut bcast, mut optin, mut optout, mut noloop) =
        (0i64, false, false, false, false);
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let store = &ctx.shared.store;
    let mut j = 3;
    while j < c.len() {
        let more = j + 1 < c.len();
        let a = c.arg(j);
        if is(a, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return err("A client can only redirect to a single other client");
            }
            redirect = int_arg(c.arg(j))?;
            if u64::try_from(redirect).map_or(true, |id| !store.tracking().connected(id)) {
                return err("The client ID you want redirect to does not exist");
            }
        } else if is(a, "bcast") {
            bcast = true;
        } else if is(a, "optin") {
            optin = true;
        } else if is(a, "optout") {
            optout = true;
        } else if is(a, "noloop") {
            noloop = true;
        } else if is(a, "prefix") && more {
            j += 1;
            prefixes.push(c.arg(j).to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = ctx.client.tracking;
    if is(c.arg(2), "on") {
        if !bcast && !prefixes.is_empty() {
            return err("PREFIX option requires BCAST mode to be enabled");
        }
        if now.on && now.bcast != bcast {
            return err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
        if bcast && (optin || optout) {
            return err("OPTIN and OPTOUT are not compatible with BCAST");
        }
        if optin && optout {
            return err("You can't use both OPTIN and OPTOUT");
        }
        if (optin && now.optout) || (optout && now.optin) {
            return err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
        if bcast {
            check_prefixes(&store.tracking().prefixes_of(ctx.client.id), &prefixes)?;
        }
        let redirect = u64::try_from(redirect).unwrap_or(0);
        store.tracking().enable(
            &ctx.client.mailbox,
            Mode {
                redirect,
                bcast,
                noloop,
                prefixes,
            },
        );
        ctx.client.tracking = Local {
            on: true,
            bcast,
            optin,
            optout,
            noloop,
            caching: now.caching,
            redirect,
        };
        ctx.shared
            .clients
            .set_tracking(ctx.client.id, Some((redirect, bcast)));
    } else if is(c.arg(2), "off") {
        if now.on {
            store.tracking().disable(ctx.client.id);
        }
        ctx.client.tracking = Local::default();
        ctx.shared.clients.set_tracking(ctx.client.id, None);
    } else {
        return Err(CmdError::Syntax);
    }
    reply::ok(ctx.out);
    Ok(())
}

/// `CLIENT CACHING YES|NO`.
fn caching(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let t = &mut ctx.client.tracking;
    if !t.on {
        return err("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    let opt = c.arg(2);
    if is(opt, "yes") {
        if !t.optin {
            return err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
        }
    } else if is(opt, "no") {
        if !t.optout {
            return err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
        }
    } else {
        return Err(CmdError::Syntax);
    }
    t.caching = true;
    reply::ok(ctx.out);
    Ok(())
}

/// `CLIENT TRACKINGINFO`: flags (a set), redirect, prefixes.
fn trackinginfo(ctx: &mut Ctx<'_>) {
    let t = ctx.client.tracking;
    let tr = ctx.shared.store.tracking();
    let mut flags: Vec<&[u8]> = vec![if t.on { b"on" } else { b"off" }];
    if t.bcast {
        flags.push(b"bcast");
    }
    if t.optin {
        flags.push(b"optin");
        if t.caching {
            flags.push(b"caching-yes");
        }
    }
    if t.optout {
        flags.push(b"optout");
        if t.caching {
            flags.push(b"caching-no");
        }
    }
    if t.noloop {
        flags.push(b"noloop");
    }
    if t.on && tr.broken(ctx.client.id) {
        flags.push(b"broken_redirect");
    }
    let prefixes = if t.on {
        tr.prefixes_of(ctx.client.id)
    } else {
        Vec::new()
    };
    let out = &mut *ctx.out;
    reply::map_header(out, 3);
    reply::bulk(out, b"flags");
    reply::set_header(out, flags.len());
    for f in flags {
        reply::bulk(out, f);
    }
    reply::bulk(out, b"redirect");
    reply::int(
        out,
        if t.on {
            i64::try_from(t.redirect).unwrap_or(i64::MAX)
        } else {
            -1
        },
    );
    reply::bulk(out, b"prefixes");
    reply::array_header(out, prefixes.len());
    for p in &prefixes {
        reply::bulk(out, p);
    }
}

/// After `client` ran the read-only data command `spec` (`cmd`) successfully, under
/// its stripe locks: remembers its key arguments if the client tracks them now.
pub(crate) fn after_read(store: &Store, client: &Client, spec: &Spec, cmd: &Command) {
    if spec.flags.contains(&"readonly") {
        remember(store, client, &spec.keys.of(cmd));
    }
}

/// `client` read `keys` (a read-only command's keys; a script that ran a read
/// passes its declared keys, as Redis does): remembers them if it tracks them now.
/// The caller holds the keys' stripe locks.
pub(crate) fn remember(store: &Store, client: &Client, keys: &[&[u8]]) {
    if client.tracking.remembers() {
        store.tracking().remember(store.pubsub(), client.id, keys);
    }
}

/// After any command: `CLIENT CACHING` applies to the next command only (or to the
/// whole of a MULTI/EXEC block), and CLIENT subcommands do not use it up.
pub(crate) fn after_command(client: &mut Client, name: &str) {
    if client.tracking.caching && client.multi.is_none() && name != "client" {
        client.tracking.caching = false;
    }
}

/// The connection closed: its tracking ends and it is no REDIRECT target any more.
pub(crate) fn disconnect(store: &Store, client: &mut Client) {
    let t = store.tracking();
    if client.tracking.on {
        t.disable(client.id);
        client.tracking = Local::default();
    }
    t.unregister(client.id);
}
