// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: record decoder of the fixed-width packed entropy
// (docs/codec.md §19: flags bits 2-4 = 4). Same stream interface and status
// codes as speckv_dec; the top sends it the records whose flags byte says
// entropy 4 and it validates them completely (§8 with the widened entropy
// field, §19.1 payload length, §19.5 field and padding checks, CRC32C).
//
// A record pipeline of two stages, records in order; every record has one of
// NB buffer banks from its first beat until its last page beat (or, for a
// rejected record, its status) is loaded into the output registers:
//   IN     record beats into the bank (BB bytes per cycle), CRC32C over bytes
//          0..19 and 24.. as they arrive, the length counted, the (scale,
//          zero point) pairs of the beat checked (§19.5: s16 sign 0 and
//          exponent != 31, z16 exponent != 31; G from the header beat); at
//          the last beat the header, length, CRC, payload length and padding
//          checks give the record's status.
//   OUT    E elements per cycle: q from the stream (b-bit slices), y =
//          fma(q, sf, zf) in binary32 (one rounding), then FP16-sat / BF16 /
//          FP32; one page beat per cycle; the status goes with the last beat
//          (a rejected record: the status alone).
// OUT takes the next record in the cycle it loads the last beat of one, so
// records whose input takes no more beats than their page leave one page
// beat per cycle.
// A valid record whose page is larger than MAX_BYTES (it does not fit the
// record buffer) ends with UNSUP after the header, length and CRC checks.
`default_nettype none
module speckv_pdec #(
  parameter integer DW = 512,
  parameter integer MODES = 39,
  parameter integer MAX_BYTES = 4096
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
  localparam integer RBMAX = 24 + MAX_BYTES;
  localparam integer NB = 4;                      // record banks (records in flight)
  localparam [3:0] ST_OK = 4'd0, ST_HDR = 4'd1, ST_LEN = 4'd2, ST_CRC = 4'd3, ST_SCALE = 4'd4,
                   ST_STREAM = 4'd5, ST_VALUE = 4'd6, ST_UNSUP = 4'd7;

  `include "speckv_codec_fn.vh"
  `include "speckv_packed_fn.vh"

  reg [7:0]  rb [0:NB*RBMAX-1];
  // per bank: the record's fields and status
  reg [3:0]  m_code [0:NB-1];
  reg [31:0] m_n [0:NB-1];
  reg [31:0] m_C [0:NB-1];
  reg [31:0] m_esz [0:NB-1];
  reg [31:0] m_sbase [0:NB-1];
  reg [31:0] m_obytes [0:NB-1];
  reg [7:0]  m_dtype [0:NB-1];
  reg [3:0]  m_bits [0:NB-1];
  reg [1:0]  m_grp [0:NB-1];

  reg [7:0]  doneI, doneO;          // records completed per stage (mod 256)
  reg        i_in;                  // IN: inside a record
  reg [31:0] i_len, i_crc, i_G;
  reg        i_sbad;                // IN: a bad (scale, zero point) pair among the first G
  reg        o_act;
  reg [1:0]  o_bank;
  reg [31:0] o_pos;

  wire [1:0] i_bank = doneI[1:0];
  wire [7:0] inflight = doneI - doneO;
  assign in_ready = i_in || (inflight < NB);

  function automatic [7:0] rbb(input [1:0] bk, input [31:0] k);
    rbb = (k < RBMAX) ? rb[bk * RBMAX + k] : 8'd0;
  endfunction
  function automatic [31:0] rd32(input [1:0] bk, input [31:0] k);
    rd32 = {rbb(bk, k + 3), rbb(bk, k + 2), rbb(bk, k + 1), rbb(bk, k)};
  endfunction

  integer j, k;
  reg [31:0] t, i, g, bp, raw, gg, need, y, len0, kk, nh, ch, n, C, esz, plen, G;
  reg [15:0] s16, z16;
  reg [7:0]  q, b5, b6, b7, sb, dtype, nextO;
  reg [3:0]  code, bits;
  reg [1:0]  bk, grp;
  reg        hok, first, sbad, ofin, ocan;
  reg [DW-1:0] ob;

  always @(posedge clk) begin
    if (rst) begin
      doneI <= 8'd0;
      doneO <= 8'd0;
      i_in <= 1'b0;
      i_len <= 32'd0;
      o_act <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_nbytes <= {NBW{1'b0}};
      out_data <= {DW{1'b0}};
      st_valid <= 1'b0;
      st_code <= ST_OK;
    end else begin
      // ------------------------------------------------------------ IN
      if (in_valid && in_ready) begin
        first = !i_in;
        len0 = first ? 32'd0 : i_len;
        t = first ? 32'hFFFFFFFF : i_crc;
        sbad = first ? 1'b0 : i_sbad;
        if (first) begin
          // G of the header beat (BB >= 32: the header is in it; a shorter record fails the header check)
          nh = {in_data[95:88], in_data[87:80], in_data[79:72], in_data[71:64]};
          ch = {16'd0, in_data[111:104], in_data[103:96]};
          gg = (in_data[55:48] == 8'd0) ? 32'd1 : (in_data[55:48] == 8'd1) ? ch : nh / (ch == 32'd0 ? 32'd1 : ch);
        end else begin
          gg = i_G;
        end
        i_G <= gg;
        for (j = 0; j < BB; j = j + 1)
          if (j < in_nbytes) begin
            kk = len0 + j;
            if (kk < RBMAX) rb[i_bank * RBMAX + kk] = in_data[8*j +: 8];
            if (kk < 20 || kk >= 24) begin
              t = t ^ {24'd0, in_data[8*j +: 8]};
              for (k = 0; k < 8; k = k + 1)
                t = t[0] ? ((t >> 1) ^ 32'h82F63B78) : (t >> 1);
            end
            // §19.5 on pair (kk - 24) / 4 (a pair never spans two beats: 24 + 4g and BB are multiples of 4)
            if (kk >= 24 && kk[1:0] == 2'd0 && (kk - 32'd24) / 32'd4 < gg && j + 3 < BB) begin
              s16 = in_data[8*j +: 16];
              z16 = in_data[8*(j % (BB - 3)) + 16 +: 16];
              if (s16[15] || s16[14:10] == 5'd31 || z16[14:10] == 5'd31) sbad = 1'b1;
            end
          end
        i_crc <= t;
        i_sbad <= sbad;
        i_len <= len0 + in_nbytes;
        i_in <= !in_last;
        if (in_last) begin
          // §8 header with entropy 4 (§19), length, CRC, §19.1 payload length, padding
          bk = i_bank;
          kk = len0 + in_nbytes;           // record length
          b7 = rbb(bk, 7);
          n = rd32(bk, 8);
          C = {16'd0, rbb(bk, 13), rbb(bk, 12)};
          dtype = rbb(bk, 4);
          b5 = rbb(bk, 5);
          b6 = rbb(bk, 6);
          bits = b5 > 8'd8 ? 4'd0 : b5[3:0];
          grp = b6[1:0];
          esz = (dtype == 8'd3) ? 32'd4 : (dtype == 8'd0) ? 32'd1 : 32'd2;
          plen = rd32(bk, 16);
          hok = kk >= 32'd24 && rbb(bk, 0) == 8'h53 && rbb(bk, 1) == 8'h4B && rbb(bk, 2) == 8'd1 && rbb(bk, 3) < MODES &&
                rbb(bk, 3) != 8'd0 && dtype >= 8'd1 && dtype <= 8'd3 && rbb(bk, 14) == 8'd0 && rbb(bk, 15) == 8'd0 &&
                n != 32'd0 && n <= 32'h01000000 && C != 32'd0 && (n % (C == 0 ? 32'd1 : C)) == 32'd0 &&
                b5 >= 8'd3 && b5 <= 8'd8 && b6 <= 8'd2 && b7[1:0] == 2'd0 && b7[7:5] == 3'd0 &&
                b7[4:2] == 3'd4;
          raw = n * esz;
          G = (b6 == 8'd0) ? 32'd1 : (b6 == 8'd1) ? C : n / (C == 0 ? 32'd1 : C);
          if (hok && (plen < 32'd2 * G || plen > raw)) hok = 1'b0;
          need = 32'd4 * G + (n * {28'd0, bits} + 32'd7) / 32'd8;
          code = ST_OK;
          if (!hok) code = ST_HDR;
          else if (plen > kk - 32'd24 || kk != plen + 32'd24) code = ST_LEN;
          else if (~t != rd32(bk, 20)) code = ST_CRC;
          else if (raw > MAX_BYTES) code = ST_UNSUP;
          else if (plen != need) code = ST_STREAM;
          else if ((n * bits) % 32'd8 != 32'd0 && (rbb(bk, 24 + plen - 1) >> ((n * bits) % 32'd8)) != 8'd0) code = ST_STREAM;
          else if (sbad) code = ST_SCALE;
          m_code[bk] = code;
          m_n[bk] = n;
          m_C[bk] = C;
          m_esz[bk] = esz;
          m_sbase[bk] = 32'd24 + 32'd4 * G;
          m_obytes[bk] = raw;
          m_dtype[bk] = dtype;
          m_bits[bk] = bits;
          m_grp[bk] = grp;
          doneI <= doneI + 8'd1;
        end
      end

      // ------------------------------------------------------------ OUT
      ofin = 1'b0;
      ocan = (!out_valid || out_ready) && (!st_valid || st_ready);
      if (out_valid && out_ready) begin
        out_valid <= 1'b0;
        out_last <= 1'b0;
      end
      if (st_valid && st_ready) st_valid <= 1'b0;
      if (ocan && o_act) begin
        bk = o_bank;
        if (m_code[bk] != ST_OK) begin
          st_code <= m_code[bk];
          st_valid <= 1'b1;
          ofin = 1'b1;
        end else begin
          // BB output bytes: BB / esize elements from element pos / esize
          for (j = 0; j < BB / 2; j = j + 1) begin
            i = o_pos / m_esz[bk] + j;
            y = 32'd0;
            if (i < m_n[bk] && (m_esz[bk] == 32'd2 || j < BB / 4)) begin
              q = 8'd0;
              for (k = 0; k < 8; k = k + 1)
                if (k < m_bits[bk]) begin
                  bp = i * m_bits[bk] + k;
                  sb = rbb(bk, m_sbase[bk] + (bp >> 3));
                  q[k] = sb[bp[2:0]];
                end
              g = (m_grp[bk] == 2'd0) ? 32'd0 : (m_grp[bk] == 2'd1) ? i % m_C[bk] : i / m_C[bk];
              s16 = {rbb(bk, 24 + 4*g + 1), rbb(bk, 24 + 4*g)};
              z16 = {rbb(bk, 24 + 4*g + 3), rbb(bk, 24 + 4*g + 2)};
              y = pk_fma(q, s16, z16);
            end
            if (m_esz[bk] == 32'd4) begin
              if (j < BB / 4) ob[32*j +: 32] = y;
            end else if (m_dtype[bk] == 8'd2) ob[16*j +: 16] = fp32_to_bf16(y);
            else ob[16*j +: 16] = fp32_to_fp16_sat(y);
          end
          out_data <= ob;
          out_nbytes <= (m_obytes[bk] - o_pos >= BB) ? BB[NBW-1:0] : (m_obytes[bk] - o_pos);
          out_valid <= 1'b1;
          o_pos <= o_pos + BB;
          if (o_pos + BB >= m_obytes[bk]) begin
            out_last <= 1'b1;
            st_code <= ST_OK;               // the status goes with the last beat
            st_valid <= 1'b1;
            ofin = 1'b1;
          end else begin
            out_last <= 1'b0;
          end
        end
      end
      nextO = doneO + {7'd0, ofin};
      if (ofin) begin
        o_act <= 1'b0;
        doneO <= nextO;
      end
      if ((!o_act || ofin) && doneI != nextO) begin
        o_act <= 1'b1;
        o_bank <= nextO[1:0];
        o_pos <= 32'd0;
      end
    end
  end
endmodule
`default_nettype wire
