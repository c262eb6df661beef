//! The one quit signal every thread checks: set by a stop signal (SIGINT, SIGTERM, SIGHUP,
//! SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM), the q key, the end of the input, or an error. A
//! second signal aborts (exit 130) once the outputs are finalized. A run that reads its
//! inputs from a file makes SIGHUP read it again instead (`on_hangup`).
//!
//! Invariants:
//! - the signal handler sets the flag before it does anything else, and its message is
//!   written best effort, so a closed standard error can't keep a stop from happening;
//! - the handler is installed first thing in `main`, so a signal at any moment is a stop,
//!   never the default action that would kill the process and lose a file; across an
//!   `exec` (a run handed to the OpenCV build, a run started again) the signals are held
//!   back, pending, until the new program catches them;
//! - every wait that may be long (pacing, a camera's pause before it is tried again) is
//!   woken by the stop it waits for (`Stop::watch`), and sleeps without waking until then;
//! - while a pipeline runs (`Watched`), a signalled stop ends the process within
//!   `STOP_GRACE` of the last sign of progress (`beat`), whatever blocks it (a frozen
//!   display, a reader of standard output that stopped reading): the watchdog then runs the
//!   `at_end` hooks (which finalize every open file) and exits 1 saying so; an output being
//!   finalized (`Finishing`) counts as progress;
//! - an abort (second signal, or the watchdog) waits for an output being finalized and runs
//!   the `at_end` hooks before the process ends, so a video file is always left playable;
//! - the process ends one way (`end`): the `at_end` registry is the one list of what must be
//!   finalized, run once by an abort or by the exit handler, whichever comes;
//! - one abort only: a later one (the watchdog firing while a second signal's hooks run) and
//!   `main`'s own exit wait for it, so the exit code and the last message are the first
//!   abort's.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

static ABORTING: AtomicBool = AtomicBool::new(false);
/// The exit code of an abort under way (0: none).
static ABORT_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// Outputs being finalized right now.
static FINISHING: AtomicUsize = AtomicUsize::new(0);
/// Milliseconds since `EPOCH` of the last sign of progress.
static LAST_BEAT: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();
/// Whether a pipeline is running: the watchdog judges progress only then (before, every
/// phase is bounded or interruptible; after, only outputs are being finished).
static WATCHING: AtomicBool = AtomicBool::new(false);
/// What must be finalized however the process ends (`at_end`): the one registry the exit
/// handler and an abort both run.
static AT_END: Mutex<Vec<(u64, EndHook)>> = Mutex::new(Vec::new());
/// What SIGHUP does instead of stopping, where a run gave it a job (`on_hangup`).
static HANGUP: Mutex<Option<fn()>> = Mutex::new(None);

/// The signals that stop a run.
pub const STOP_SIGNALS: [i32; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// How long a signalled stop may go without progress before the watchdog ends the process.
pub const STOP_GRACE: Duration = Duration::from_millis(1000);
/// The longest an abort waits for an output being finalized.
const FINISH_WAIT: Duration = Duration::from_secs(60);

/// Whether the process is ending because of an abort (exit handlers say so).
pub fn aborting() -> bool {
    ABORTING.load(Ordering::SeqCst)
}

/// Whether a stop signal came (the run was stopped from outside, not ended by itself).
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// A stop signal other than SIGHUP arrived: set in the handler itself, before the signals
/// thread has read it (`exec` looks at it).
static ARRIVED: AtomicBool = AtomicBool::new(false);

/// A stop signal that came before the handler was installed (`main`'s early catcher): the
/// same stop as one that came after.
pub fn note_early_signal() {
    SIGNALLED.store(true, Ordering::SeqCst);
    Stop::process().request();
}

/// Whether a stop signal came at any time in this process.
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// The exit code of the abort under way: 130 for a second stop signal, 1 for the watchdog.
pub fn abort_code() -> Option<i32> {
    match ABORT_CODE.load(Ordering::SeqCst) {
        0 => None,
        c => Some(c),
    }
}

/// When the process started (its stop handler installed, first thing in `main`): an input
/// that is not open yet has been down since.
pub fn process_start() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// A sign that the run is making progress (a frame went out, a wait ticked).
pub fn beat() {
    LAST_BEAT.store(now_ms(), Ordering::Relaxed);
}

/// Marks a pipeline running while it lives: the stop watchdog judges its progress.
pub struct Watched(());

impl Watched {
    /// Starts marking.
    pub fn start() -> Self {
        beat();
        WATCHING.store(true, Ordering::SeqCst);
        Watched(())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        WATCHING.store(false, Ordering::SeqCst);
    }
}

/// Something to finalize if the process ends before the run does (`at_end`).
type EndHook = Arc<dyn Fn() + Send + Sync>;

/// Registers `hook` to run if the process ends while the returned `AtEnd` lives: on an
/// abort (a second stop signal, the watchdog), or an `exit` called from inside a library
/// (Qt, when the display dies). Hooks run once, in the order registered, on the thread that
/// ends the process; they must not block for long and must tolerate running while other
/// threads still work. Dropping the `AtEnd` takes the hook back.
pub fn at_end(hook: impl Fn() + Send + Sync + 'static) -> AtEnd {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static HANDLER: std::sync::Once = std::sync::Once::new();
    // SAFETY: `end_hooks_at_exit` is an `extern "C" fn()` that never unwinds (each hook
    // ignores its errors) and holds the registry's lock only to take the hooks out.
    HANDLER.call_once(|| unsafe {
        libc::atexit(end_hooks_at_exit);
    });
    let id = NEXT.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut hooks) = AT_END.lock() {
        hooks.push((id, Arc::new(hook)));
    }
    AtEnd(id)
}

/// A hook registered with `at_end`, taken back when dropped.
#[must_use = "the hook is taken back when this is dropped"]
pub struct AtEnd(u64);

impl Drop for AtEnd {
    fn drop(&mut self) {
        if let Ok(mut hooks) = AT_END.lock() {
            hooks.retain(|(id, _)| *id != self.0);
        }
    }
}

/// Runs every registered hook once (they are taken out first). The registry is held only
/// for a push or a removal, never across a hook, so waiting for it is brief.
fn run_end_hooks() {
    let hooks = match AT_END.lock() {
        Ok(mut hooks) => std::mem::take(&mut *hooks),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    };
    for (_, hook) in hooks {
        hook();
    }
}

extern "C" fn end_hooks_at_exit() {
    run_end_hooks();
}

/// Makes SIGHUP call `hook` instead of stopping the run (`--inputs`: read the file again,
/// as daemons read their configuration again on SIGHUP). `hook` runs on the signal thread:
/// it must not block.
pub fn on_hangup(hook: fn()) {
    if let Ok(mut h) = HANGUP.lock() {
        *h = Some(hook);
    }
}

/// Runs the SIGHUP hook where one is set; false where SIGHUP stops the run. Before the
/// run sets one, a process given an inputs file (`--inputs`) takes SIGHUP as the reload it
/// will ask for anyway: the run reads the file as it starts (a SIGHUP held across the
/// `exec` of a run started again comes here).
fn hung_up() -> bool {
    match HANGUP.lock().ok().and_then(|h| *h) {
        Some(hook) => {
            hook();
            true
        }
        None if reads_a_list() => {
            crate::debug!("SIGHUP while starting: the inputs file is read as the run starts");
            true
        }
        None => false,
    }
}

/// Whether the command line names an inputs file (`--inputs FILE`, `--inputs=FILE`).
fn reads_a_list() -> bool {
    std::env::args_os().any(|a| {
        a.to_str()
            .is_some_and(|a| a == "--inputs" || a.starts_with("--inputs="))
    })
}

/// Marks an output being finalized while it lives: aborts wait for it, and the watchdog
/// counts it as progress.
pub struct Finishing(());

impl Finishing {
    /// Starts marking.
    pub fn start() -> Self {
        FINISHING.fetch_add(1, Ordering::SeqCst);
        Finishing(())
    }
}

impl Drop for Finishing {
    fn drop(&mut self) {
        FINISHING.fetch_sub(1, Ordering::SeqCst);
        beat();
    }
}

/// Runs the abort hooks, after any output being finalized is done, and ends the process
/// with `code` without running exit handlers again (another thread may be running them).
/// Only the first abort runs: one that comes while another is under way (the watchdog
/// firing while a second signal's hooks finalize a file) waits for that one to end the
/// process, so the exit code is the first abort's and no hook runs twice at once.
fn abort_now(code: i32) -> ! {
    if ABORTING
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        yield_to_abort(); // never returns: ABORTING is never cleared
    }
    ABORT_CODE.store(code, Ordering::SeqCst);
    let deadline = Instant::now() + FINISH_WAIT;
    while FINISHING.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    run_end_hooks();
    end_now(code)
}

/// Ends the process with `code`, the one way framepipe ends it: after any abort under way
/// (which ends it with its own code), with `_exit` where exit-time handlers must not run
/// (`skip_handlers`: a thread left blocked inside a source, CUDA objects left to the
/// kernel), else through `exit` (which runs the `at_end` hooks still registered).
pub fn end(code: i32, skip_handlers: bool) -> ! {
    yield_to_abort();
    if skip_handlers {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        end_now(code)
    }
    std::process::exit(code)
}

/// `_exit`: no exit handler runs again (another thread may be running them).
fn end_now(code: i32) -> ! {
    // SAFETY: _exit only ends the process; standard output is flushed by `end` and standard
    // error is unbuffered or flushed by msg's writers.
    unsafe { libc::_exit(code) }
}

/// Where an abort is under way, waits for it to end the process (it always does, within
/// `FINISH_WAIT` and its hooks); otherwise returns at once. `main` calls it before ending
/// the process itself, so an error seen because the abort closed an output (a writer already
/// finalized by a hook) never replaces the abort's exit code or its message.
pub fn yield_to_abort() {
    while aborting() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The shared quit flag. A thread that waits for it sleeps until it is asked (or its own
/// deadline), woken by `request`: a wait costs no wake-ups in between (a wall of cameras
/// that are down, each pausing before it is tried again, spins no thread).
#[derive(Clone, Default)]
pub struct Stop(Arc<Flag>);

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stop({})", self.is_requested())
    }
}

/// A `Stop`'s flag and the waits that `request` wakes.
#[derive(Default)]
struct Flag {
    set: AtomicBool,
    /// Each wait under way: its number and where to wake it (`Watch`).
    waiting: Mutex<Vec<(u64, crossbeam_channel::Sender<()>)>>,
    next: AtomicU64,
}

/// A wait on one or more `Stop`s (`Stop::watch`): its channel gets a message when one of
/// them is asked; dropping it takes it off each.
pub struct Watch {
    /// Ready once a watched stop was asked.
    pub woken: crossbeam_channel::Receiver<()>,
    tx: crossbeam_channel::Sender<()>,
    on: Vec<(Stop, u64)>,
}

impl Watch {
    /// A wait not yet on any stop.
    fn new() -> Self {
        let (tx, woken) = crossbeam_channel::bounded(1);
        Self {
            woken,
            tx,
            on: Vec::new(),
        }
    }

    /// Adds `stop` to what wakes it.
    fn add(&mut self, stop: &Stop) {
        let id = stop.0.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut waiting) = stop.0.waiting.lock() {
            waiting.push((id, self.tx.clone()));
        }
        self.on.push((stop.clone(), id));
    }

    /// Whether one of its stops is asked.
    fn asked(&self) -> bool {
        self.on.iter().any(|(s, _)| s.is_requested())
    }

    /// Sleeps until `deadline`, or less when one of its stops is asked; true when one was.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        if self.asked() {
            return true;
        }
        let _ = self.woken.recv_deadline(deadline);
        self.asked()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        for (stop, id) in &self.on {
            if let Ok(mut waiting) = stop.0.waiting.lock() {
                waiting.retain(|(i, _)| i != id);
            }
        }
    }
}

impl Stop {
    /// The longest a polling wait (one that must also look at something other than the
    /// flag) goes without looking at it.
    pub const TICK: Duration = Duration::from_millis(20);

    /// A flag not yet set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's own flag, the one stop signals set.
    pub fn process() -> Self {
        static PROCESS: OnceLock<Stop> = OnceLock::new();
        PROCESS.get_or_init(Stop::new).clone()
    }

    /// Asks every thread to stop, waking those that wait for it.
    pub fn request(&self) {
        self.0.set.store(true, Ordering::SeqCst);
        if let Ok(waiting) = self.0.waiting.lock() {
            for (_, tx) in waiting.iter() {
                let _ = tx.try_send(());
            }
        }
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.0.set.load(Ordering::SeqCst)
    }

    /// A wait woken when this stop is asked (`Watch`), to wait on it beside a channel.
    pub fn watch(&self) -> Watch {
        Self::watch_all(&[self])
    }

    /// A wait woken when any of `stops` is asked.
    pub fn watch_all(stops: &[&Stop]) -> Watch {
        let mut watch = Watch::new();
        for stop in stops {
            watch.add(stop);
        }
        watch
    }

    /// Sleeps until `deadline`, or less when a stop is asked for; true when it was.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        if self.is_requested() {
            return true;
        }
        if deadline <= Instant::now() {
            return false;
        }
        self.watch().sleep_until(deadline)
    }

    /// Routes every stop signal to the process's flag (`Stop::process`); call it first
    /// thing. A first signal stops and starts the watchdog; a second aborts.
    pub fn install_signal_handler() -> anyhow::Result<()> {
        static INSTALLED: OnceLock<()> = OnceLock::new();
        if INSTALLED.set(()).is_err() {
            return Ok(());
        }
        beat();
        let signalled = Arc::new(AtomicBool::new(false));
        let on_signal = move |name: &str| {
            // The flag first, the message after, so the stop never waits on a write.
            Stop::process().request();
            SIGNALLED.store(true, Ordering::SeqCst);
            if signalled.swap(true, Ordering::SeqCst) {
                if FINISHING.load(Ordering::SeqCst) > 0 {
                    crate::say!("framepipe: aborting once the output is finalized");
                } else {
                    crate::say!("framepipe: aborted");
                }
                abort_now(130);
            }
            beat();
            crate::info!("{name}: stopping; finishing the frames in flight (Ctrl-C again aborts)");
            std::thread::Builder::new()
                .name("stop watchdog".into())
                .spawn(watchdog)
                .ok();
        };
        // Seen at once, in the handler, by `exec` (the signals thread may take a while to
        // read it on a loaded machine: a run started again in that while lost the stop).
        for sig in STOP_SIGNALS.into_iter().filter(|&s| s != libc::SIGHUP) {
            // SAFETY: the action only stores to an atomic, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, || ARRIVED.store(true, Ordering::SeqCst))
            }?;
        }
        let mut signals = signal_hook::iterator::Signals::new(STOP_SIGNALS)?;
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if sig == libc::SIGHUP && hung_up() {
                        continue;
                    }
                    on_signal(signal_name(sig));
                }
            })?;
        Ok(())
    }
}

/// A stop signal's name, for the line that says the run is stopping.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "SIGALRM",
    }
}

/// Makes a stop signal that comes before `install_signal_handler` (while the shared
/// libraries initialise, before `main`) call `note`, instead of killing the process.
///
/// # Safety
/// `note` runs in a signal handler: it must be async-signal-safe (store to an atomic, no
/// allocation, no lock).
pub unsafe fn catch_early_signals(note: fn()) {
    for sig in STOP_SIGNALS {
        // SIGHUP may be a reload: it is noted apart (`hangup_while_starting_stops`).
        let note = if sig == libc::SIGHUP {
            note_hangup
        } else {
            note
        };
        // SAFETY: the caller's contract: `note` is async-signal-safe, as `note_hangup` is
        // (it only stores to an atomic).
        let _ = unsafe { signal_hook::low_level::register(sig, note) };
    }
    // A signal held back across `exec` (below) comes now.
    hold_signals(&STOP_SIGNALS, false);
}

/// SIGHUP came while framepipe started (before `install_signal_handler`).
static EARLY_HANGUP: AtomicBool = AtomicBool::new(false);

fn note_hangup() {
    EARLY_HANGUP.store(true, Ordering::SeqCst);
}

/// Whether a SIGHUP that came while framepipe started stops it: not where the command line
/// names an inputs file, whose reload it asks for (the run reads the file as it starts:
/// a SIGHUP sent while a run is started again with a changed list is one).
pub fn hangup_while_starting_stops() -> bool {
    EARLY_HANGUP.load(Ordering::SeqCst) && !reads_a_list()
}

/// Replaces the process by `cmd` (the same pid, descriptors and standard streams), with the
/// stop signals held back across the change: one that comes while the new program's shared
/// libraries load stays pending until its `catch_early_signals` takes it, instead of
/// killing it with the default action. Returns only where the program did not start (the
/// signals come through again), or where a stop signal came first (`Interrupted`: the
/// caller's run stops as any other does).
pub fn exec(cmd: &mut std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    hold_signals(&STOP_SIGNALS, true);
    let err = match signalled() || ARRIVED.load(Ordering::SeqCst) {
        true => std::io::Error::new(std::io::ErrorKind::Interrupted, "a stop signal came"),
        false => cmd.exec(),
    };
    hold_signals(&STOP_SIGNALS, false);
    err
}

/// Blocks (`hold`) or unblocks `signals` in the calling thread (a blocked signal stays
/// pending, also across `exec`).
fn hold_signals(signals: &[i32], hold: bool) {
    // SAFETY: `set` is plain data, emptied by sigemptyset before it is read; the calls
    // only change this thread's signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
        }
        let how = if hold {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// After a signalled stop: ends the process when nothing progresses for `STOP_GRACE`.
fn watchdog() {
    loop {
        std::thread::sleep(Stop::TICK);
        if aborting() {
            return; // the abort under way ends the process
        }
        if FINISHING.load(Ordering::SeqCst) > 0 || !WATCHING.load(Ordering::SeqCst) {
            beat();
            continue;
        }
        let quiet = now_ms().saturating_sub(LAST_BEAT.load(Ordering::Relaxed));
        if quiet >= STOP_GRACE.as_millis() as u64 {
            crate::say!(
                "framepipe: error: the run did not end within {:.1} s of the stop (the window or an output stopped answering); open files are finalized with the frames written so far",
                STOP_GRACE.as_secs_f64()
            );
            abort_now(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_wakes_on_a_stop() {
        let stop = Stop::new();
        let s = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            s.request();
        });
        let start = Instant::now();
        assert!(stop.sleep_until(start + Duration::from_secs(3600)));
        assert!(start.elapsed() < Duration::from_secs(2));
        t.join().unwrap();
        assert!(!Stop::new().sleep_until(Instant::now() + Duration::from_millis(5)));
    }

    #[test]
    fn a_wait_on_two_stops_is_woken_by_either_and_leaves_no_waiter_behind() {
        let (one, two) = (Stop::new(), Stop::new());
        let asked = two.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            asked.request();
        });
        let start = Instant::now();
        assert!(Stop::watch_all(&[&one, &two]).sleep_until(start + Duration::from_secs(3600)));
        assert!(start.elapsed() < Duration::from_secs(2));
        t.join().unwrap();
        // Each wait took itself off the stops it watched.
        assert!(one.0.waiting.lock().unwrap().is_empty());
        assert!(two.0.waiting.lock().unwrap().is_empty());
    }
}
