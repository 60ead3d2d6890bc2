use super::*;

const STREAM: &[u8] = b": keepalive\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n";

/// `stream` fed in two chunks at every split index, and byte by byte: each gives `whole`.
fn every_chunking(stream: &[u8], whole: &[Event]) {
    for split in 0..=stream.len() {
        let mut p = Parser::new();
        let mut out = Vec::new();
        p.feed(&stream[..split], &mut out);
        p.feed(&stream[split..], &mut out);
        p.finish(&mut out);
        assert_eq!(
            out,
            whole,
            "split at {split} of {:?}",
            String::from_utf8_lossy(stream)
        );
    }
    let mut p = Parser::new();
    let mut out = Vec::new();
    for b in stream {
        p.feed(std::slice::from_ref(b), &mut out);
    }
    p.finish(&mut out);
    assert_eq!(out, whole, "byte by byte");
}

/// A sample stream with every line ended by `eol`.
fn sample(eol: &str) -> Vec<u8> {
    [
        ": a comment",
        "",
        "retry: 1500",
        "event: message",
        "id: 7",
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}",
        "",
        "data:{\"jsonrpc\":\"2.0\",",
        "data",
        "data:  \"id\":5,\"result\":{}}",
        "unknown: field",
        "",
        "event: empty",
        "",
    ]
    .iter()
    .flat_map(|l| [*l, eol])
    .collect::<String>()
    .into_bytes()
}

fn sample_events() -> Vec<Event> {
    vec![
        Event {
            event: Some("message".into()),
            id: Some("7".into()),
            data: b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}".to_vec(),
        },
        Event {
            event: None,
            id: None,
            data: b"{\"jsonrpc\":\"2.0\",\n\n \"id\":5,\"result\":{}}".to_vec(),
        },
    ]
}

#[test]
fn whole_body_gives_each_event_with_joined_data() {
    let ev = events(STREAM);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].event.as_deref(), Some("message"));
    assert_eq!(
        ev[0].data,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}"
    );
    assert_eq!(ev[1].event, None);
    assert_eq!(
        ev[1].data,
        b"{\"jsonrpc\":\"2.0\",\n\"id\":5,\"result\":{}}"
    );
    every_chunking(STREAM, &ev);
}

#[test]
fn cr_lf_and_crlf_line_ends_at_every_split_point_give_the_same_events() {
    let want = sample_events();
    for eol in ["\n", "\r", "\r\n"] {
        let stream = sample(eol);
        assert_eq!(events(&stream), want, "{eol:?}");
        every_chunking(&stream, &want);
        // A leading BOM is skipped, wherever the chunks split it.
        let with_bom = [BOM, &stream].concat();
        every_chunking(&with_bom, &want);
    }
    // Mixed line ends in one stream.
    let mixed = b"data: a\rdata: b\n\r\ndata: c\r\n\n";
    let got: Vec<Vec<u8>> = events(mixed).into_iter().map(|e| e.data).collect();
    assert_eq!(got, [b"a\nb".to_vec(), b"c".to_vec()]);
}

#[test]
fn a_cr_ending_one_chunk_and_a_lf_starting_the_next_are_one_line_end() {
    let mut p = Parser::new();
    let mut out = Vec::new();
    p.feed(b"data: a\r", &mut out);
    p.feed(b"\ndata: b\r", &mut out);
    p.feed(b"\n", &mut out);
    assert!(out.is_empty(), "no blank line yet: {out:?}");
    p.feed(b"\r", &mut out);
    p.feed(b"\n", &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data, b"a\nb");
    // An empty chunk between the CR and the LF changes nothing.
    let mut p = Parser::new();
    let mut out = Vec::new();
    for c in [&b"data: x\r"[..], b"", b"\n", b"\r", b"", b"\n"] {
        p.feed(c, &mut out);
    }
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data, b"x");
}

#[test]
fn cr_only_lines_fields_without_colon_and_unterminated_events() {
    let ev = events(b"id: 7\rdata\rdata:x\r\r: c\ndata:last");
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].id.as_deref(), Some("7"));
    assert_eq!(ev[0].data, b"\nx");
    assert_eq!(ev[1].data, b"last");
    // Events without data are not dispatched.
    assert!(events(b"event: ping\n\n: only a comment\n\n").is_empty());
}

#[test]
fn bom_retry_and_look_alike_fields() {
    // Only a leading BOM is skipped; a partial one is the stream's bytes.
    assert_eq!(events(b"\xEF\xBB\xBFdata: a\n\n")[0].data, b"a");
    assert!(events(b"\xEF\xBBdata: a\n\n").is_empty());
    assert_eq!(events(b"\xEF\xBB\n\ndata: a\n\n")[0].data, b"a");
    assert_eq!(events(b"data: \xEF\xBB\xBFa\n\n")[0].data, b"\xEF\xBB\xBFa");
    // Field names are exact: `datas`, `Data`, ` data` are other fields.
    assert!(events(b"datas: a\nData: b\n data: c\n\n").is_empty());
    let mut p = Parser::new();
    let mut out = Vec::new();
    p.feed(b"retry: 3000\nretry: soon\nretry:\ndata: x\n\n", &mut out);
    assert_eq!(p.retry(), Some(3000));
    assert_eq!(out.len(), 1);
}

#[test]
fn the_line_reader_hands_values_without_copying() {
    let mut got = Vec::new();
    let mut lines = Lines::new();
    let chunk: &[u8] = b"data: abc\nevent:e\n\n";
    lines.feed(chunk, |p| got.push(p));
    assert_eq!(
        got,
        [
            Piece::Value(Field::Data, b"abc"),
            Piece::End(Field::Data),
            Piece::Value(Field::Event, b"e"),
            Piece::End(Field::Event),
            Piece::Dispatch,
        ]
    );
    let Piece::Value(_, v) = got[0] else { panic!() };
    assert_eq!(v.as_ptr(), chunk[6..].as_ptr());
}

#[test]
fn the_response_is_the_last_event_that_is_one() {
    let sse = Some(&b"text/event-stream; charset=utf-8"[..]);
    let body = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n\
        data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
    assert_eq!(
        response_of(sse, body).as_deref(),
        Some(&b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"[..])
    );
    let two = b"data: {\"id\":1,\"error\":{}}\n\ndata: {\"id\":1,\"result\":null}\n\n";
    assert_eq!(
        response_of(sse, two).as_deref(),
        Some(&b"{\"id\":1,\"result\":null}"[..])
    );
    assert_eq!(
        response_of(sse, b"data: {\"method\":\"x\"}\n\ndata: [1]\n\n"),
        None
    );
    let json = br#"{"id":1,"result":{}}"#;
    assert_eq!(
        response_of(Some(b"application/json"), json).as_deref(),
        Some(&json[..])
    );
    assert_eq!(
        response_of(None, b"not json").as_deref(),
        Some(&b"not json"[..])
    );
    assert!(is_response(br#"{"error":{"code":1}}"#));
    assert!(!is_response(br#"{"method":"ping","id":1}"#));
    assert!(!is_response(b"\"result\""));
}

#[test]
fn content_type_recognition() {
    assert!(is_event_stream(b"text/event-stream"));
    assert!(is_event_stream(b" Text/Event-Stream; charset=utf-8"));
    assert!(!is_event_stream(b"application/json"));
    assert!(!is_event_stream(b"text/event-streamy"));
}
