// speckv KV codec: record decoder (docs/codec.md §1-§9).
//
// Decodes raw records (mode 0) and quantised records with one page scale
// (group 0), scan order none/linear (or columnar with C = 1, the same
// thing), entropy bytes, RLE or Rice (§6.2), any b in 3..8 and any dtype:
// this covers the presets paper (1), int8 (2), p8r (9), vp8/vp6/vp5 (15-17).
// Other valid records (channel/token scales, b 9..12 of §13, columnar with
// C > 1) end with status UNSUP; the decoder still checks their header,
// length and CRC and never hangs on them.
//
// Rice: the window is read at a bit offset (bo); one beat decodes its E
// symbols serially (a 3-bit k at every 64th symbol), reading bits past the
// record's end as zero like the C++; a symbol whose bits are not all in the
// window yet waits for them, or is a truncated stream once the input ended.
//
// A record arrives as DW-bit beats of record bytes (in_nbytes valid, BB on
// every beat but the last, in_last on the last): in_last gives the record
// length, like `len` of the C++ decode(). The decoded page leaves as DW-bit
// beats (out_nbytes valid, out_last on the last), then one status per record
// on st_*. Output is streamed before the CRC is known: a page whose status is
// not OK must be discarded by the consumer (the C++ decode() returns nothing
// for it). Every record the C++ decoder rejects ends with a status != OK.
//
// Records overlap: once record k's input has ended, the header of record
// k+1 is taken and its stream bytes queue in the window behind record k's,
// so record k+1's first output beat follows record k's last one with no gap
// (II=1 on the output across records). The status of record k is presented
// no earlier than record k's last output beat, and no output beat of record
// k+1 is presented before that status is accepted: a consumer that takes the
// status once no output beat is pending pairs beats and status correctly.
//
// Latency: the first output beat leaves 2 cycles after the beat that completes
// it is accepted; II=1 (one output beat per cycle) in the steady state, across
// records too, while the input keeps the window fed (a beat is decoded as soon
// as the window holds the bytes it reads; a raw 4 KiB record is 65 input beats).
`default_nettype none
module speckv_dec #(
  parameter integer DW = 512,           // data width in bits, multiple of 64, >= 256
  parameter integer MODES = 18          // known mode ids 0..MODES-1 (§9 and appended presets; = codec::kModeCount)
) (
  input  wire                       clk,
  input  wire                       rst,
  input  wire                       in_valid,
  output wire                       in_ready,
  input  wire [DW-1:0]              in_data,
  input  wire [$clog2(DW/8+1)-1:0]  in_nbytes,
  input  wire                       in_last,
  output reg                        out_valid,
  input  wire                       out_ready,
  output reg  [DW-1:0]              out_data,
  output reg  [$clog2(DW/8+1)-1:0]  out_nbytes,
  output reg                        out_last,
  output reg                        st_valid,
  input  wire                       st_ready,
  output reg  [3:0]                 st_code
);
  localparam integer BB = DW / 8;
  localparam integer NBW = $clog2(BB + 1);
  localparam integer EMAX = BB / 2;
  localparam integer WC = 3 * BB;                  // stream byte window
  localparam integer WFW = $clog2(WC + 1);

  // status codes (st_code)
  localparam [3:0] ST_OK = 4'd0, ST_HDR = 4'd1, ST_LEN = 4'd2, ST_CRC = 4'd3, ST_SCALE = 4'd4,
                   ST_STREAM = 4'd5, ST_VALUE = 4'd6, ST_UNSUP = 4'd7;
  localparam [3:0] ST_SHORT = 4'd15;               // internal: the window ran out of bytes

  `include "speckv_codec_fn.vh"

  // X: the record being decoded (h_*, decode state); N: the next record,
  // whose header was taken after X's input ended (n_*). The input side
  // (rx, crc, in_end, i_*) follows the newest record: N if n_v, else X.
  reg        x_v, n_v;
  reg [7:0]  h_dtype, n_dtype;
  reg [31:0] h_n, h_plen, n_n, n_plen;
  reg        h_raw, h_delta, h_rle, n_raw, n_delta, n_rle;
  reg        h_rice, n_rice;      // entropy Rice (§6.2)
  reg [3:0]  h_w, n_w;            // Rice escape width W = b + 1
  reg [7:0]  h_qmax, n_qmax;
  reg [15:0] h_scale, n_scale;
  reg [7:0]  h_ebeat, n_ebeat;    // elements per output beat
  reg [2:0]  h_esz, n_esz;
  reg [5:0]  h_soff, n_soff;      // record offset of the entropy stream: 24 raw, 26 quantised
  reg [3:0]  err, n_err;
  reg        unsup, n_unsup;
  reg        x_chk, x_lenbad, x_crcbad;  // X's length / CRC verdicts, saved when N's header came

  reg [32:0] rx;               // record bytes received (newest record)
  reg [31:0] crc;
  reg        in_end;
  reg [31:0] i_plen, i_crcf;
  reg        i_push;           // the newest record's stream bytes go to the window
  reg [WC*8-1:0] win;          // X's stream bytes (wk of them), then N's
  reg [WFW-1:0]  wfill, wk;
  reg [32:0] cc;               // stream bytes consumed
  reg [31:0] oc;               // bytes (raw) or elements (quantised) output
  reg        out_done;
  reg [7:0]  rem, runv, prev_s;
  reg        lit;
  reg [2:0]  rk;               // Rice: k of the current block
  reg [2:0]  bo;               // Rice: bits of window byte 0 already consumed

  wire [32:0] rec_end = {1'b0, i_plen} + 33'd24;

  // ---------------------------------------------------------------- beat 0: header (§8)
  reg [7:0]  p_mode, p_dtype, p_b, p_grp, p_flags;
  reg [31:0] p_n, p_plen, p_crc;
  reg [15:0] p_c, p_res, p_magic, p_f;
  reg [2:0]  p_esz;
  reg [34:0] p_raw;
  reg        p_ok, p_quant, p_unsup, p_scale_bad;
  always @(*) begin
    p_magic = in_data[15:0];
    p_mode = in_data[31:24];
    p_dtype = in_data[39:32];
    p_b = in_data[47:40];
    p_grp = in_data[55:48];
    p_flags = in_data[63:56];
    p_n = in_data[95:64];
    p_c = in_data[111:96];
    p_res = in_data[127:112];
    p_plen = in_data[159:128];
    p_crc = in_data[191:160];
    p_f = in_data[207:192];
    p_esz = (p_dtype == 8'd3) ? 3'd4 : (p_dtype == 8'd0) ? 3'd1 : 3'd2;
    p_raw = {3'd0, p_n} * p_esz;
    p_quant = (p_mode != 8'd0);
    p_ok = (in_nbytes >= 24) && p_magic == 16'h4B53 && in_data[23:16] == 8'd1 && p_mode < MODES &&
           p_dtype <= 8'd3 && p_res == 16'd0 && p_n != 32'd0 && p_n <= 32'h01000000 &&
           p_c != 16'd0 && (p_n % {16'd0, (p_c == 16'd0) ? 16'd1 : p_c}) == 32'd0;
    if (!p_quant)
      p_ok = p_ok && p_b == 8'd0 && p_grp == 8'd0 && p_flags == 8'd0 && {3'd0, p_plen} == p_raw;
    else
      p_ok = p_ok && p_dtype != 8'd0 && p_b >= 8'd3 && p_b <= 8'd12 && (p_b <= 8'd8 || p_flags[3:2] == 2'd2) &&
             p_grp <= 8'd2 &&
             p_flags[1:0] != 2'd3 && p_flags[3:2] != 2'd3 && p_flags[7:4] == 4'd0 &&
             {3'd0, p_plen} <= p_raw && (p_grp != 8'd0 || p_plen >= 32'd2);
    p_unsup = p_quant && (p_grp != 8'd0 || p_b > 8'd8 || (p_flags[1:0] == 2'd2 && p_c != 16'd1));
    // §8: exponent in [20, 226]; §13: [27 - L, 226] = [28 - b, 226] when b > 8
    p_scale_bad = p_quant && (in_nbytes >= 26) && p_f != 16'd0 &&
                  (p_f[15] || p_f[14:7] < ((p_b > 8'd8) ? 8'd28 - p_b : 8'd20) || p_f[14:7] > 8'd226);
  end

  // ---------------------------------------------------------------- input side
  wire i_take = i_push && (n_v || (err == 4'd0 && !out_done));   // newest record still pushes
  wire hdr_slot = !x_v || (!n_v && in_end);                     // next beat in is a header
  assign in_ready = hdr_slot ? (wfill <= WC - BB) : (!in_end && (!i_take || wfill <= WC - BB));
  wire in_fire = in_valid && in_ready;
  wire hdr_fire = in_fire && hdr_slot;
  wire body_fire = in_fire && !hdr_slot;

  // bytes of this beat that belong to the entropy stream, shifted to byte 0
  reg [BB*8-1:0] pu_data;
  reg [32:0]     pu_cnt;
  reg            pu_en;
  reg [32:0]     pu_end;
  reg [5:0]      pu_soff;
  reg [BB*8-1:0] c0_word;
  always @(*) begin
    pu_data = in_data;
    pu_cnt = 33'd0;
    pu_en = 1'b0;
    pu_soff = p_quant ? 6'd26 : 6'd24;
    pu_end = 33'd0;
    if (hdr_slot) begin
      pu_end = ({1'b0, p_plen} + 33'd24 < {{(33-NBW){1'b0}}, in_nbytes}) ? {1'b0, p_plen} + 33'd24
                                                                        : {{(33-NBW){1'b0}}, in_nbytes};
      pu_cnt = (pu_end > {27'd0, pu_soff}) ? pu_end - {27'd0, pu_soff} : 33'd0;
      pu_data = in_data >> (pu_soff * 8);
      pu_en = p_ok && !p_unsup && !p_scale_bad;
    end else begin
      pu_end = (rec_end > rx) ? rec_end - rx : 33'd0;
      pu_cnt = (pu_end < {{(33-NBW){1'b0}}, in_nbytes}) ? pu_end : {{(33-NBW){1'b0}}, in_nbytes};
      pu_en = i_take;
    end
    if (!in_fire) pu_en = 1'b0;
    if (pu_cnt < BB) pu_data = pu_data & ~({BB*8{1'b1}} << (pu_cnt * 8));
    // CRC of beat 0 skips the CRC field (bytes 20..23)
    c0_word = {32'd0, in_data[BB*8-1:192], in_data[159:0]};
  end

  // ---------------------------------------------------------------- decode step
  wire        ended = n_v || in_end || (rx >= rec_end);     // X's input is complete
  // no beat of X goes out before the previous record's status is taken
  wire        st_free = !st_valid || st_ready;
  reg  [31:0] ds_m;            // symbols (quantised) or bytes (raw) of this beat
  reg         ds_go;
  reg  [3:0]  ds_err;
  reg  [WFW:0] ds_p;           // stream bytes consumed by this beat
  reg  [7:0]  ds_rem, ds_rv, ds_ps, ds_sym, ds_c, ds_mag;
  reg         ds_lit;
  reg  [31:0] ds_bits, ds_l, ds_left;
  reg  [DW-1:0] ds_word;
  // Rice (§6.2)
  reg  [WC*8+31:0] rw;         // X's window bits from the read position, zero past X's bytes
  reg  [12:0] ra, rp, re;      // bits available, bits read by this beat, window bit where it ends
  reg  [4:0]  ru, rl;          // unary length (capped at 15), code length
  reg  [23:0] r24;
  reg  [10:0] rz;              // (14 << 7) | 127 at most before the range check
  reg  [23:0] rlow;
  reg  [2:0]  rk_n, bo_n;
  reg  [11:0] rv, rmag;        // value (two's complement) and |value|
  reg  [7:0]  rpad;
  integer     dj, rt;
  always @(*) begin
    ds_m = 32'd0;
    dj = 0;
    ds_go = 1'b0;
    ds_err = 4'd0;
    ds_p = {(WFW+1){1'b0}};
    ds_rem = rem;
    ds_lit = lit;
    ds_rv = runv;
    ds_ps = prev_s;
    ds_sym = 8'd0;
    ds_c = 8'd0;
    ds_mag = 8'd0;
    ds_bits = 32'd0;
    ds_l = 32'd0;
    ds_left = 32'd0;
    ds_word = {DW{1'b0}};
    rw = {(WC*8+32){1'b0}};
    ra = 13'd0;
    rp = 13'd0;
    re = 13'd0;
    ru = 5'd0;
    rl = 5'd0;
    r24 = 24'd0;
    rz = 11'd0;
    rlow = 24'd0;
    rk_n = rk;
    bo_n = bo;
    rv = 12'd0;
    rmag = 12'd0;
    rpad = 8'd0;
    rt = 0;
    if (x_v && err == 4'd0 && !unsup && !out_done && (!out_valid || out_ready) && st_free) begin
      if (h_raw) begin
        ds_m = (h_plen - oc < BB) ? h_plen - oc : BB;
        if ({1'b0, wk} >= ds_m[WFW:0]) begin
          ds_go = 1'b1;
          ds_p = ds_m[WFW:0];
          ds_word = win[BB*8-1:0] & ~({BB*8{1'b1}} << (ds_m * 8));
        end else if (ended) begin
          ds_err = ST_STREAM;
        end
      end else begin
        ds_m = (h_n - oc < h_ebeat) ? h_n - oc : {24'd0, h_ebeat};
        // greedy: the beat goes as soon as the window holds the bytes it reads
        begin
          ds_go = 1'b1;
          if (h_rice) begin
            rw = {32'd0, win & ~({WC*8{1'b1}} << {wk, 3'b000})} >> bo;
            ra = {{(10-WFW){1'b0}}, wk, 3'b000} - {10'd0, bo};
          end
          for (dj = 0; dj < EMAX; dj = dj + 1)
            if (dj < ds_m && ds_err == 4'd0) begin
              ds_left = h_n - oc - dj;
              if (h_rice) begin
                // a block of 64 symbols starts with its k
                if (((oc + dj) & 32'd63) == 32'd0) begin
                  if (rp + 13'd3 > ra) ds_err = ST_SHORT;
                  else begin rk_n = rw[rp +: 3]; rp = rp + 13'd3; end
                end
                if (ds_err == 4'd0) begin
                  r24 = rw[rp +: 24];
                  ru = 5'd0;
                  for (rt = 0; rt < 15; rt = rt + 1)
                    if (r24[rt] && ru == rt) ru = ru + 5'd1;
                  if (ru < 5'd15) begin
                    rlow = r24 >> (ru + 5'd1);
                    rz = ({6'd0, ru} << rk_n) | ({4'd0, rlow[6:0]} & ((11'd1 << rk_n) - 11'd1));
                    rl = ru + 5'd1 + {2'd0, rk_n};
                  end else begin
                    rz = {2'd0, r24[23:15]} & ((11'd1 << h_w) - 11'd1);
                    rl = 5'd15 + {1'b0, h_w};
                  end
                  // every bit the code reads is one it consumes: all of them must be here
                  if (rp + {8'd0, rl} > ra) ds_err = ST_SHORT;
                  else begin
                    rp = rp + {8'd0, rl};
                    rv = rz[0] ? ~{2'd0, rz[10:1]} : {2'd0, rz[10:1]};   // unzigzag
                    if (h_delta) rv = rv + {{4{ds_ps[7]}}, ds_ps};
                    rmag = rv[11] ? 12'd0 - rv : rv;
                    if (rz > {1'b0, h_qmax, 2'b00} || rmag > {4'd0, h_qmax}) ds_err = ST_VALUE;
                    ds_sym = rv[7:0];
                  end
                end
              end else if (!h_rle) begin
                if (ds_p >= wk) ds_err = ST_SHORT;
                else begin ds_sym = win[ds_p*8 +: 8]; ds_p = ds_p + 1'b1; end
              end else begin
                if (ds_rem == 8'd0) begin
                  if (ds_p >= wk) ds_err = ST_SHORT;
                  else begin
                    ds_c = win[ds_p*8 +: 8];
                    ds_p = ds_p + 1'b1;
                    if (!ds_c[7]) begin
                      ds_l = {24'd0, ds_c} + 32'd1;
                      ds_lit = 1'b1;
                    end else begin
                      ds_l = {25'd0, ds_c[6:0]} + 32'd3;
                      ds_lit = 1'b0;
                    end
                    if (ds_l > ds_left) ds_err = ST_STREAM;
                    else if (!ds_lit) begin
                      if (ds_p >= wk) ds_err = ST_SHORT;
                      else begin ds_rv = win[ds_p*8 +: 8]; ds_p = ds_p + 1'b1; end
                    end
                    ds_rem = ds_l[7:0];
                  end
                end
                if (ds_err == 4'd0) begin
                  if (ds_lit) begin
                    if (ds_p >= wk) ds_err = ST_SHORT;
                    else begin ds_sym = win[ds_p*8 +: 8]; ds_p = ds_p + 1'b1; end
                  end else begin
                    ds_sym = ds_rv;
                  end
                  ds_rem = ds_rem - 8'd1;
                end
              end
              if (ds_err == 4'd0 && !h_rice) begin
                ds_sym = h_delta ? ds_ps + ds_sym : ds_sym;    // §6.0, wrapping
                ds_mag = ds_sym[7] ? 8'd0 - ds_sym : ds_sym;    // 0x80 -> 0x80 = 128
                if (ds_sym == 8'h80 || ds_mag > h_qmax) ds_err = ST_VALUE;
              end
              if (ds_err == 4'd0) begin
                ds_ps = ds_sym;
                ds_bits = dequant_bits(ds_sym, h_scale);
                if (h_dtype == 8'd3)
                  ds_word[(dj % (BB / 4))*32 +: 32] = ds_bits;
                else if (h_dtype == 8'd2)
                  ds_word[dj*16 +: 16] = fp32_to_bf16(ds_bits);
                else
                  ds_word[dj*16 +: 16] = fp32_to_fp16_sat(ds_bits);
              end
            end
          if (h_rice && ds_err == 4'd0) begin
            // bytes consumed; the last beat also takes the padding byte, whose
            // bits past the stream must be zero
            re = rp + {10'd0, bo};
            if (oc + ds_m == h_n && re[2:0] != 3'd0) begin
              rpad = rw[rp +: 8] & ((8'd1 << (4'd8 - {1'b0, re[2:0]})) - 8'd1);
              if (rpad != 8'd0) ds_err = ST_STREAM;
              ds_p = re[WFW+3:3] + 1'b1;
              bo_n = 3'd0;
            end else begin
              ds_p = re[WFW+3:3];
              bo_n = re[2:0];
            end
          end
          if (ds_err != 4'd0) ds_go = 1'b0;
          // out of bytes: wait for more, or a truncated stream once the input has ended
          if (ds_err == ST_SHORT) ds_err = ended ? ST_STREAM : 4'd0;
        end
      end
    end
  end

  // ---------------------------------------------------------------- end of X
  // X ends once its input has ended and it is decoded, rejected or UNSUP; its
  // status goes out the same cycle as its last beat is registered.
  wire        ds_last = ds_go && (oc + ds_m == (h_raw ? h_plen : h_n));
  wire        x_fin = x_v && (n_v || in_end) && (err != 4'd0 || unsup || out_done || ds_last) && st_free;
  wire        in_to_n = n_v || (x_v && !x_fin && hdr_fire);         // this beat belongs to N
  wire [32:0] cc_now = cc + (ds_go ? {{(33-WFW-1){1'b0}}, ds_p} : 33'd0);
  wire        lenbad = x_chk ? x_lenbad : (rx != rec_end);
  wire        crcbad = x_chk ? x_crcbad : (~crc != i_crcf);
  reg [3:0] fin_code;
  always @(*) begin
    if (err != 4'd0) fin_code = err;
    else if (lenbad) fin_code = ST_LEN;
    else if (crcbad) fin_code = ST_CRC;
    else if (unsup) fin_code = ST_UNSUP;
    else if (cc_now != {1'b0, h_plen} + 33'd24 - {27'd0, h_soff}) fin_code = ST_STREAM;
    else fin_code = ST_OK;
  end

  // ---------------------------------------------------------------- window update
  reg [WC*8-1:0]  wn_win;
  reg [WFW:0]     wn_fill, wn_sh, wn_k;
  reg [WFW:0]     wn_push;
  always @(*) begin
    wn_sh = x_fin ? {1'b0, wk} : (ds_go ? ds_p : {(WFW+1){1'b0}});
    wn_win = win >> (wn_sh * 8);
    wn_fill = {1'b0, wfill} - wn_sh;
    wn_push = {(WFW+1){1'b0}};
    if (pu_en && pu_cnt != 33'd0) begin
      wn_win = wn_win | ({{((WC-BB)*8){1'b0}}, pu_data} << (wn_fill * 8));
      wn_push = pu_cnt[WFW:0];
    end
    wn_fill = wn_fill + wn_push;
    // after X ends every byte left is the next record's
    if (x_fin) wn_k = wn_fill;
    else wn_k = {1'b0, wk} - (ds_go ? ds_p : {(WFW+1){1'b0}}) + (in_to_n ? {(WFW+1){1'b0}} : wn_push);
  end

  // header fields of beat 0
  wire [3:0] p_err = !p_ok ? ST_HDR : p_scale_bad ? ST_SCALE : 4'd0;
  wire [7:0] p_qmax = (8'd1 << (p_b[3:0] - 4'd1)) - 8'd1;
  wire [7:0] p_ebeat = (p_dtype == 8'd3) ? BB / 4 : BB / 2;
  wire       hdr_to_x = hdr_fire && !in_to_n;

  always @(posedge clk) begin
    if (rst) begin
      x_v <= 1'b0;
      n_v <= 1'b0;
      x_chk <= 1'b0;
      in_end <= 1'b0;
      i_push <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_data <= {DW{1'b0}};
      out_nbytes <= {NBW{1'b0}};
      st_valid <= 1'b0;
      st_code <= ST_OK;
      win <= {WC*8{1'b0}};
      wfill <= {WFW{1'b0}};
      wk <= {WFW{1'b0}};
    end else begin
      if (out_valid && out_ready) out_valid <= 1'b0;
      if (st_valid && st_ready) st_valid <= 1'b0;
      win <= wn_win;
      wfill <= wn_fill[WFW-1:0];
      wk <= wn_k[WFW-1:0];

      // input side: the newest record
      if (hdr_fire) begin
        rx <= {{(33-NBW){1'b0}}, in_nbytes};
        crc <= crc_upd(32'hFFFFFFFF, c0_word, in_nbytes - 8'd4);
        in_end <= in_last;
        i_plen <= p_plen;
        i_crcf <= p_crc;
        i_push <= p_ok && !p_unsup && !p_scale_bad;
      end else if (body_fire) begin
        rx <= rx + {{(33-NBW){1'b0}}, in_nbytes};
        crc <= crc_upd(crc, in_data, in_nbytes);
        if (in_last) in_end <= 1'b1;
      end

      // decode side: X
      if (ds_err != 4'd0) err <= ds_err;
      if (ds_go) begin
        cc <= cc + {{(32-WFW){1'b0}}, ds_p};
        oc <= oc + ds_m;
        rem <= ds_rem;
        lit <= ds_lit;
        runv <= ds_rv;
        prev_s <= ds_ps;
        rk <= rk_n;
        bo <= bo_n;
        out_valid <= 1'b1;
        out_data <= ds_word;
        out_nbytes <= h_raw ? ds_m[NBW-1:0] : ds_m[NBW-1:0] * h_esz;
        out_last <= ds_last;
        if (ds_last) out_done <= 1'b1;
      end

      if (x_fin) begin
        st_valid <= 1'b1;
        st_code <= fin_code;
        x_chk <= 1'b0;
        x_v <= n_v || hdr_fire;
        n_v <= 1'b0;
      end
      if (hdr_fire && in_to_n) begin
        // X stays: keep its length / CRC verdicts, the input side moves on
        x_chk <= 1'b1;
        x_lenbad <= (rx != rec_end);
        x_crcbad <= (~crc != i_crcf);
        n_v <= 1'b1;
      end
      if (hdr_fire && !hdr_to_x) begin
        n_dtype <= p_dtype;
        n_n <= p_n;
        n_plen <= p_plen;
        n_raw <= !p_quant;
        n_delta <= p_flags[1:0] != 2'd0;
        n_rle <= p_flags[3:2] == 2'd1;
        n_rice <= p_flags[3:2] == 2'd2;
        n_w <= p_b[3:0] + 4'd1;
        n_qmax <= p_qmax;
        n_scale <= p_f;
        n_ebeat <= p_ebeat;
        n_esz <= p_esz;
        n_soff <= pu_soff;
        n_err <= p_err;
        n_unsup <= p_ok && p_unsup;
      end
      if (hdr_to_x || (x_fin && n_v)) begin
        // a new X: from beat 0 now, or from N
        if (hdr_to_x) begin
          h_dtype <= p_dtype;
          h_n <= p_n;
          h_plen <= p_plen;
          h_raw <= !p_quant;
          h_delta <= p_flags[1:0] != 2'd0;
          h_rle <= p_flags[3:2] == 2'd1;
          h_rice <= p_flags[3:2] == 2'd2;
          h_w <= p_b[3:0] + 4'd1;
          h_qmax <= p_qmax;
          h_scale <= p_f;
          h_ebeat <= p_ebeat;
          h_esz <= p_esz;
          h_soff <= pu_soff;
          err <= p_err;
          unsup <= p_ok && p_unsup;
          x_v <= 1'b1;
        end else begin
          h_dtype <= n_dtype;
          h_n <= n_n;
          h_plen <= n_plen;
          h_raw <= n_raw;
          h_delta <= n_delta;
          h_rle <= n_rle;
          h_rice <= n_rice;
          h_w <= n_w;
          h_qmax <= n_qmax;
          h_scale <= n_scale;
          h_ebeat <= n_ebeat;
          h_esz <= n_esz;
          h_soff <= n_soff;
          err <= n_err;
          unsup <= n_unsup;
        end
        cc <= 33'd0;
        oc <= 32'd0;
        out_done <= 1'b0;
        rem <= 8'd0;
        lit <= 1'b0;
        runv <= 8'd0;
        prev_s <= 8'd0;
        rk <= 3'd0;
        bo <= 3'd0;
      end
    end
  end
endmodule
`default_nettype wire
