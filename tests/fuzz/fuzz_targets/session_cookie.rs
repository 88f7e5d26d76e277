//! The gateway's session cookie (`pb::Session`, in both codecs) as any
//! client may send it back: forged, edited, another user's, or genuine
//! with its other fields changed. It must lease only a session it signed
//! for that user, and never panic.
//!
//! Input: 1 byte of settings (codec, which user asks, whether the
//! genuine id and signature are put in, what became of that session),
//! then the cookie's bytes.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use myquic::api::{Codec, pb};
use myquic::fuzzing::{Refusal, Sessions};

fuzz_target!(|data: &[u8]| {
    let Some((&settings, body)) = data.split_first() else {
        return;
    };
    let codec = if settings & 1 == 0 {
        Codec::Proto
    } else {
        Codec::Json
    };
    let Ok(mut cookie) = codec.decode::<pb::Session>(body) else {
        return;
    };
    let sessions = Sessions::new([7; 32], Duration::from_secs(60), 4);
    let Ok(first) = sessions.lease("app", None) else {
        unreachable!("a first session fits");
    };
    let genuine = sessions.cookie(&first.slot, &first.state);
    let first_id = first.slot.id.clone();
    match settings >> 3 & 3 {
        0 => drop(first),
        1 => sessions.close(first),
        2 => sessions.discard(first, true),
        _ => {} // still in use
    }
    if settings & 2 != 0 {
        cookie.signature = genuine.signature.clone();
        let vitess = cookie.vitess_session.get_or_insert_with(Default::default);
        vitess.session_uuid = first_id.clone();
    }
    let owner = if settings & 4 == 0 { "app" } else { "other" };
    let named = cookie
        .vitess_session
        .as_ref()
        .is_some_and(|v| !v.session_uuid.is_empty());
    match sessions.lease(owner, Some(&cookie)) {
        Ok(lease) => {
            if named {
                // A named session is only ever one this gateway signed
                // for this user.
                assert_eq!(owner, "app", "another user's session leased");
                assert_eq!(lease.slot.id, first_id, "an unsigned session leased");
            }
            let back = sessions.cookie(&lease.slot, &lease.state);
            let _ = codec.encode(&back);
        }
        Err(Refusal::Busy(slot)) => assert_eq!(slot.id, first_id),
        Err(_) => {}
    }
});
