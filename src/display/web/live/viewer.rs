//! One WebRTC viewer (a WHEP session): str0m's `Rtc`, Sans-IO, driven by a thread of its
//! own over a UDP socket of its own bound to the address the viewer reached the view on
//! (its one host candidate), and a second thread that reads the socket. The feed's units go
//! out as they came (str0m packetizes them: RTP, SRTP); the first picture is the last
//! keyframe kept, sent with the units since at once, their times pressed together so that
//! the viewer decodes up to the present and shows it without waiting; a viewer that asks
//! for a picture again (PLI, FIR) or whose queue overflowed is given the same. Where the
//! stream has sound and the offer takes audio, the feed's Opus goes out on it as it comes
//! (a stream without sound has its audio line refused: a browser would wait for it).
//!
//! Invariants: a viewer's thread waits only on its own socket, its own queue or its own
//! timer, never on the pipeline or another viewer; the RTP times it sends only grow; it ends
//! when the viewer goes (ICE disconnected, or no datagram for `SILENT`), when the session is
//! deleted, or when the view stops, within `TICK`.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use str0m::change::SdpOffer;
use str0m::format::Codec;
use str0m::media::{MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};

use super::feed::{Feed, Place, Unit};

/// How often a viewer's threads look at their stop flags.
pub const TICK: Duration = Duration::from_millis(100);
/// A viewer that sends nothing (no ICE, no RTCP) for this long is gone.
const SILENT: Duration = Duration::from_secs(15);

/// Why an offer is not taken (each a 4xx with its one line).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Not an SDP offer, or one without video (400).
    #[error("{0}")]
    Bad(String),
    /// The stream can't be sent in a way the offer takes (415).
    #[error("{0}")]
    Unmatched(String),
}

/// A viewer's running session: its flag to end it.
pub struct Session {
    /// Set to end the session (a `DELETE`, or the view's stop).
    pub end: Arc<AtomicBool>,
    /// Set by the session once it ended.
    pub ended: Arc<AtomicBool>,
}

/// Takes `offer` (SDP text) for `feed`, reached at `ip`: the answer (SDP text) and the
/// session, running; `stop` is the view's.
pub fn start(
    feed: Arc<Feed>,
    offer: &str,
    ip: IpAddr,
    stop: Arc<AtomicBool>,
) -> Result<(String, Session), Refused> {
    let parsed = parse_offer(offer)?;
    if let Some(why) = feed.not_webrtc() {
        return Err(Refused::Unmatched(why));
    }
    let place = feed.watch().map_err(Refused::Unmatched)?;
    let sounds = feed.sounds();
    let socket = UdpSocket::bind((ip, 0))
        .map_err(|e| Refused::Unmatched(format!("no UDP socket on {ip}: {e}")))?;
    let local = socket
        .local_addr()
        .map_err(|e| Refused::Unmatched(e.to_string()))?;
    let mut rtc = Rtc::builder()
        .clear_codecs()
        .enable_h264(true)
        .enable_opus(sounds, false)
        .build(Instant::now());
    let candidate = Candidate::host(local, "udp").map_err(|e| Refused::Unmatched(e.to_string()))?;
    rtc.add_local_candidate(candidate);
    let answer = rtc
        .sdp_api()
        .accept_offer(parsed)
        .map_err(|e| Refused::Bad(format!("the offer can't be answered ({e})")))?
        .to_sdp_string();
    let answer = formats_of_rejected(&answer, offer);
    if !answer.lines().any(|l| l.contains(" H264/90000")) {
        return Err(Refused::Unmatched(
            "the offer takes no H.264 (packetization-mode 1), which the camera's video is".into(),
        ));
    }
    let end = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(AtomicBool::new(false));
    let session = Session {
        end: end.clone(),
        ended: ended.clone(),
    };
    let mut place = place;
    let hears = answer
        .lines()
        .any(|l| l.starts_with("m=audio ") && !l.starts_with("m=audio 0 "));
    if !hears {
        // No sound goes to this viewer: its queue is let go, so that none is encoded for it.
        place.sound = crossbeam_channel::never();
    }
    let running = Running {
        rtc,
        socket,
        local,
        feed,
        place,
        sent: Sent::default(),
        connected: false,
        mid: None,
        pt: None,
        audio: None,
        heard: None,
    };
    let spawned = std::thread::Builder::new()
        .name("whep-viewer".into())
        .spawn(move || {
            running.run(end, stop);
            ended.store(true, Ordering::SeqCst);
        });
    spawned.map_err(|e| Refused::Unmatched(format!("no thread for the viewer: {e}")))?;
    Ok((answer, session))
}

/// `offer` read as SDP with a video line; a 400's reason where it is not.
fn parse_offer(offer: &str) -> Result<SdpOffer, Refused> {
    let parsed = SdpOffer::from_sdp_string(offer).map_err(|e| {
        let e = e.to_string();
        let first = e
            .lines()
            .find(|l| l.contains("Expected"))
            .unwrap_or("unreadable");
        Refused::Bad(format!("the body is not an SDP offer ({})", first.trim()))
    })?;
    if !offer.lines().any(|l| l.starts_with("m=video")) {
        return Err(Refused::Bad("the offer has no video".into()));
    }
    Ok(parsed)
}

/// The RTP times a viewer was sent: the last, and what is added to a unit's own time.
#[derive(Default)]
struct Sent {
    last: Option<i64>,
    offset: i64,
    /// The units just sent from the keyframe kept: their copies still in the queue are
    /// skipped.
    skip: Vec<Arc<Unit>>,
}

impl Sent {
    /// The RTP time of `unit`, sent live, or pressed against the last where `burst`.
    fn time_of(&mut self, unit: &Unit, burst: bool) -> i64 {
        let live = unit.pts90k + self.offset;
        let t = match (self.last, burst) {
            (None, _) => live,
            (Some(last), true) => last + 1,
            (Some(last), false) => live.max(last + 1),
        };
        self.offset = t - unit.pts90k;
        self.last = Some(t);
        t
    }
}

/// A viewer's session as its thread runs it.
struct Running {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    feed: Arc<Feed>,
    place: Place,
    sent: Sent,
    /// ICE and DTLS are up.
    connected: bool,
    /// The video's media line, and the payload type units go out as, once connected.
    mid: Option<Mid>,
    pt: Option<Pt>,
    /// The audio's media line and Opus's payload type, where the offer takes sound.
    audio: Option<(Mid, Option<Pt>)>,
    /// What is added to a sound's own time, from the first one sent, and the last sent.
    heard: Option<(i64, i64)>,
}

impl Running {
    fn run(mut self, end: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
        let datagrams = match read_socket(&self.socket, end.clone(), stop.clone()) {
            Some(rx) => rx,
            None => return,
        };
        let mut heard = Instant::now();
        while !end.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
            let Some(deadline) = self.drive() else { break };
            if heard.elapsed() > SILENT {
                break;
            }
            let wait = deadline.saturating_duration_since(Instant::now()).min(TICK);
            select! {
                recv(datagrams) -> d => match d {
                    Ok((at, from, bytes)) => {
                        heard = at;
                        self.received(at, from, &bytes);
                    }
                    Err(_) => break,
                },
                recv(self.place.units) -> u => match u {
                    Ok(unit) => self.unit(&unit),
                    Err(_) => break,
                },
                recv(self.place.sound) -> s => match s {
                    Ok(sound) => self.sound(&sound),
                    Err(_) => break,
                },
                default(wait) => {
                    let _ = self.rtc.handle_input(Input::Timeout(Instant::now()));
                }
            }
            if self.place.behind.swap(false, Ordering::SeqCst) {
                self.again();
            }
        }
        crate::debug!("WebRTC: a viewer's session ended");
        self.rtc.disconnect();
        let _ = self.drive();
        end.store(true, Ordering::SeqCst); // the reader ends too
    }

    /// Sends what str0m has to send and takes its events; when next it needs a timeout,
    /// or None once the session is over.
    fn drive(&mut self) -> Option<Instant> {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => return Some(t),
                Ok(Output::Transmit(t)) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(e)) => {
                    if !self.event(e) {
                        return None;
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Takes event `e`; false where it ends the session.
    fn event(&mut self, e: Event) -> bool {
        match e {
            Event::MediaAdded(m) if m.kind == MediaKind::Video && self.mid.is_none() => {
                self.mid = Some(m.mid);
                self.ready();
            }
            Event::MediaAdded(m) if m.kind == MediaKind::Audio && self.audio.is_none() => {
                self.audio = Some((m.mid, None));
                self.ready();
            }
            Event::Connected => {
                self.connected = true;
                self.ready();
            }
            Event::KeyframeRequest(r) => {
                crate::debug!("WebRTC: a viewer asked for a picture again ({:?})", r.kind);
                self.again();
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => return false,
            _ => {}
        }
        true
    }

    fn received(&mut self, at: Instant, source: SocketAddr, bytes: &[u8]) {
        let Ok(contents) = bytes.try_into() else {
            return;
        };
        let r = Receive {
            proto: Protocol::Udp,
            source,
            destination: self.local,
            contents,
        };
        let _ = self.rtc.handle_input(Input::Receive(at, r));
    }

    /// Once connected and the video's line known: the payload type, and the first picture.
    fn ready(&mut self) {
        if let (true, Some((mid, None))) = (self.connected, self.audio) {
            self.audio = Some((mid, pt_of(&mut self.rtc, mid, Codec::Opus)));
        }
        let (true, Some(mid), None) = (self.connected, self.mid, self.pt) else {
            return;
        };
        self.pt = h264_pt(&mut self.rtc, mid);
        crate::debug!(
            "WebRTC: a viewer connected (H.264 as payload {:?})",
            self.pt
        );
        self.again();
    }

    /// Sends `sound` as it comes, where the offer took sound: its times from 0 at the first.
    fn sound(&mut self, sound: &super::feed::Sound) {
        let Some((mid, Some(pt))) = self.audio else {
            return;
        };
        let (offset, last) = *self.heard.get_or_insert((-sound.t48k, -1));
        let t = (sound.t48k + offset).max(last + 1);
        self.heard = Some((t - sound.t48k, t));
        let Some(writer) = self.rtc.writer(mid) else {
            return;
        };
        let time = MediaTime::new(t.max(0) as u64, str0m::media::Frequency::FORTY_EIGHT_KHZ);
        let _ = writer.write(pt, Instant::now(), time, sound.opus.clone());
    }

    /// Sends `unit` as it comes (a copy of one just sent from the keyframe is skipped).
    fn unit(&mut self, unit: &Arc<Unit>) {
        if let Some(at) = self.sent.skip.iter().position(|k| Arc::ptr_eq(k, unit)) {
            self.sent.skip.drain(..=at);
            return;
        }
        self.sent.skip.clear();
        self.write(unit, false);
    }

    /// Sends the units from the last keyframe, pressed together: the viewer decodes up to
    /// the present at once.
    fn again(&mut self) {
        if self.pt.is_none() {
            return;
        }
        // What waits in the queue is older than what is kept, or kept too: dropped first, so
        // that nothing from before the keyframe follows it (those kept that come again are
        // skipped, `unit`).
        while self.place.units.try_recv().is_ok() {}
        let kept = self.feed.since_key();
        for unit in &kept {
            self.write(unit, true);
        }
        self.sent.skip = kept;
    }

    fn write(&mut self, unit: &Unit, burst: bool) {
        let (Some(mid), Some(pt)) = (self.mid, self.pt) else {
            return;
        };
        let t = self.sent.time_of(unit, burst);
        let Some(writer) = self.rtc.writer(mid) else {
            return;
        };
        let time = MediaTime::from_90khz(t.max(0) as u64);
        let _ = writer.write(pt, Instant::now(), time, unit.annexb.clone());
    }
}

/// `answer` with each media line it rejects (port 0) given a format of the offer's same
/// line where it lists none: RFC 3264 wants one, and browsers refuse the answer without.
fn formats_of_rejected(answer: &str, offer: &str) -> String {
    let offered: Vec<&str> = offer
        .lines()
        .filter(|l| l.starts_with("m="))
        .map(|l| l.split_whitespace().nth(3).unwrap_or("0"))
        .collect();
    let mut k = 0;
    let mut out = String::with_capacity(answer.len() + 16);
    for line in answer.split_inclusive("\r\n") {
        let text = line.trim_end();
        if text.starts_with("m=") {
            let fields: Vec<&str> = text.split_whitespace().collect();
            if fields.len() == 3 && fields[1] == "0" {
                let format = offered.get(k).copied().unwrap_or("0");
                out.push_str(&format!("{} {format}\r\n", fields.join(" ")));
                k += 1;
                continue;
            }
            k += 1;
        }
        out.push_str(line);
    }
    out
}

/// The payload type of `codec` the session negotiated on `mid`.
fn pt_of(rtc: &mut Rtc, mid: Mid, codec: Codec) -> Option<Pt> {
    let writer = rtc.writer(mid)?;
    let found = writer.payload_params().find(|p| p.spec().codec == codec);
    found.map(|p| p.pt())
}

/// The payload type of H.264 in packetization mode 1 the session negotiated on `mid`.
fn h264_pt(rtc: &mut Rtc, mid: Mid) -> Option<Pt> {
    let writer = rtc.writer(mid)?;
    let h264 = || {
        writer
            .payload_params()
            .filter(|p| p.spec().codec == Codec::H264)
    };
    let mode1 = h264().find(|p| p.spec().format.packetization_mode == Some(1));
    mode1.or_else(|| h264().next()).map(|p| p.pt())
}

/// What `socket` receives, as a queue, read by a thread of its own until `end` or `stop`.
type Datagrams = Receiver<(Instant, SocketAddr, Vec<u8>)>;

fn read_socket(
    socket: &UdpSocket,
    end: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> Option<Datagrams> {
    let socket = socket.try_clone().ok()?;
    socket.set_read_timeout(Some(TICK)).ok()?;
    let (tx, rx) = crossbeam_channel::bounded(256);
    std::thread::Builder::new()
        .name("whep-socket".into())
        .spawn(move || {
            let mut buf = vec![0u8; 2048];
            while !end.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let datagram = (Instant::now(), from, buf[..n].to_vec());
                if let Err(crossbeam_channel::TrySendError::Disconnected(_)) = tx.try_send(datagram)
                {
                    break; // a full queue loses the datagram; a gone session ends this
                }
            }
        })
        .ok()?;
    Some(rx)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rejected_line_gets_a_format_of_the_offer() {
        let offer =
            "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96 97\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111 0\r\n";
        let answer =
            "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nm=audio 0 UDP/TLS/RTP/SAVPF \r\na=mid:1\r\n";
        assert_eq!(
            super::formats_of_rejected(answer, offer),
            "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=mid:1\r\n"
        );
    }
}
