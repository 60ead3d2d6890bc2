//! The head deadline's scanner and answer, unit by unit (the deadline on real sockets:
//! tests/gateway/abuse/slow_clients.rs).

use super::*;

#[test]
fn a_blank_line_ends_the_head_in_any_line_ending() {
    for head in [
        &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        b"GET / HTTP/1.1\nHost: a\n\n",
    ] {
        assert_eq!(scan_head(false, head), Phase::Busy, "{head:?}");
    }
    assert_eq!(
        scan_head(false, b"GET / HTTP/1.1\r\nHost: a\r\n"),
        Phase::Head {
            after_newline: true
        }
    );
    assert_eq!(
        scan_head(false, b"GET / HT"),
        Phase::Head {
            after_newline: false
        }
    );
}

#[test]
fn the_end_of_a_head_is_found_across_reads() {
    let head = b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n";
    for split in 1..head.len() {
        let (a, b) = head.split_at(split);
        let mid = scan_head(false, a);
        let Phase::Head { after_newline } = mid else {
            panic!("ended early at {split}: {mid:?}")
        };
        assert_eq!(scan_head(after_newline, b), Phase::Busy, "split at {split}");
    }
}

/// The scanner read byte by byte, as it was written first: the reference the line-end scanner
/// must agree with.
fn scan_bytewise(after_newline: bool, bytes: &[u8]) -> Phase {
    let mut nl = after_newline;
    for &b in bytes {
        match b {
            b'\n' if nl => return Phase::Busy,
            b'\n' => nl = true,
            b'\r' => {}
            _ => nl = false,
        }
    }
    Phase::Head { after_newline: nl }
}

#[test]
fn the_line_end_scanner_reads_as_the_bytewise_one() {
    let alphabet = [b'\r', b'\n', b'a'];
    // Every string of up to 7 bytes over CR, LF and a letter, from either state.
    for len in 0..=7u32 {
        for code in 0..3usize.pow(len) {
            let mut c = code;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let b = alphabet[c % 3];
                    c /= 3;
                    b
                })
                .collect();
            for start in [false, true] {
                assert_eq!(
                    scan_head(start, &bytes),
                    scan_bytewise(start, &bytes),
                    "{bytes:?} from {start}"
                );
            }
        }
    }
}

#[test]
fn only_a_final_response_ends_a_request() {
    assert!(starts_final_response(b"HTTP/1.1 200 OK\r\n"));
    assert!(starts_final_response(b"HTTP/1.1 408 Request Timeout\r\n"));
    assert!(!starts_final_response(b"HTTP/1.1 100 Continue\r\n"));
    assert!(!starts_final_response(b"{\"jsonrpc\":\"2.0\"}"));
    assert!(!starts_final_response(b"HTTP/1.1"));
}

#[test]
fn the_answer_is_a_complete_response_with_a_json_rpc_error() {
    let answer = timeout_answer(Duration::from_secs(10));
    let text = String::from_utf8(answer).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 408 "));
    assert!(head.contains(&format!("content-length: {}", body.len())));
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], codes::GATEWAY_REQUEST_INCOMPLETE);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("timeouts.request_head"));
}
